"""Apple Health exports made up for tests and benchmarks (never a real
person's data): `export.xml` as the Health app writes it (the DTD preamble,
ExportDate, Me, records of many types with and without MetadataEntry
children, Workouts with nested elements, ActivitySummary, entities and CDATA
where other records carry text), with caffeine in mg and in g at odd
offsets, one caffeine record that breaks a drink rule, and the same export
zipped. Each call also returns what a correct import must store, computed
here with Python's own uuid.uuid5.

    python3 Tests/integration/health_export.py OUT.xml [--records N] [--caffeine-every K] [--zip OUT.zip]
"""
import argparse
import datetime
import uuid
import zipfile

NAMESPACE = uuid.UUID("F04AACFF-1D25-4EB2-AA68-571E035447D9")
CAFFEINE = "HKQuantityTypeIdentifierDietaryCaffeine"

PREAMBLE = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE HealthData [
<!-- HealthKit Export Version: 14 -->
<!ELEMENT HealthData (ExportDate,Me,(Record|Correlation|Workout|ActivitySummary|ClinicalRecord|Audiogram|VisionPrescription)*)>
<!ATTLIST HealthData
  locale CDATA #REQUIRED
>
<!ELEMENT ExportDate EMPTY>
<!ATTLIST ExportDate
  value CDATA #REQUIRED
>
<!ELEMENT Me EMPTY>
<!ATTLIST Me
  HKCharacteristicTypeIdentifierDateOfBirth CDATA #REQUIRED
  HKCharacteristicTypeIdentifierBiologicalSex CDATA #REQUIRED
>
<!ELEMENT Record ((MetadataEntry|HeartRateVariabilityMetadataList)*)>
<!ATTLIST Record
  type CDATA #REQUIRED
  unit CDATA #IMPLIED
  value CDATA #IMPLIED
  sourceName CDATA #REQUIRED
  sourceVersion CDATA #IMPLIED
  device CDATA #IMPLIED
  creationDate CDATA #IMPLIED
  startDate CDATA #REQUIRED
  endDate CDATA #REQUIRED
>
<!ELEMENT MetadataEntry EMPTY>
<!ATTLIST MetadataEntry
  key CDATA #REQUIRED
  value CDATA #REQUIRED
>
]>
<HealthData locale="en_US">
 <ExportDate value="2026-11-30 21:00:00 +0100"/>
 <Me HKCharacteristicTypeIdentifierDateOfBirth="" HKCharacteristicTypeIdentifierBiologicalSex="HKBiologicalSexNotSet"/>
"""

DEVICE = "&lt;&lt;HKDevice: 0x283e1c1e0&gt;, name:Apple Watch, manufacturer:Apple Inc., model:Watch&gt;"


def export_date(when, offset_minutes):
    zone = datetime.timezone(datetime.timedelta(minutes=offset_minutes))
    local = when.astimezone(zone)
    sign = "+" if offset_minutes >= 0 else "-"
    m = abs(offset_minutes)
    return local.strftime("%Y-%m-%d %H:%M:%S ") + f"{sign}{m // 60:02d}{m % 60:02d}"


def caffeine_record(source, start, value, unit):
    return (f' <Record type="{CAFFEINE}" sourceName="{source}" sourceVersion="1.0" unit="{unit}" '
            f'creationDate="{start}" startDate="{start}" endDate="{start}" value="{value}"/>\n')


def expected_drink(source, start, value, unit, offset_minutes, when):
    mg = float(value) * (1000 if unit == "g" else 1)
    return {"uuid": str(uuid.uuid5(NAMESPACE, f"{source}|{start}|{value}|{unit}")).upper(), "mgCaffeine": mg,
            "date": when.astimezone(datetime.timezone.utc), "source": f"health:{source}"}


def other_records(i, start):
    """Records of other kinds, some with children, entities and CDATA."""
    kind = i % 5
    if kind == 0:
        return (f' <Record type="HKQuantityTypeIdentifierHeartRate" sourceName="Watch &amp; Co" unit="count/min" '
                f'device="{DEVICE}" creationDate="{start}" startDate="{start}" endDate="{start}" value="{60 + i % 40}">\n'
                f'  <MetadataEntry key="HKMetadataKeyHeartRateMotionContext" value="0"/>\n </Record>\n')
    if kind == 1:
        return (f' <Record type="HKQuantityTypeIdentifierStepCount" sourceName="iPhone" unit="count" '
                f'creationDate="{start}" startDate="{start}" endDate="{start}" value="{i % 900}"/>\n')
    if kind == 2:
        return (f' <Workout workoutActivityType="HKWorkoutActivityTypeRunning" duration="30" durationUnit="min" '
                f'sourceName="Watch" creationDate="{start}" startDate="{start}" endDate="{start}">\n'
                f'  <MetadataEntry key="HKIndoorWorkout" value="0"/>\n'
                f'  <WorkoutEvent type="HKWorkoutEventTypeSegment" date="{start}" duration="5"/>\n'
                f'  <WorkoutStatistics type="HKQuantityTypeIdentifierDistanceWalkingRunning" sum="5.1" unit="km"/>\n'
                f'  <WorkoutRoute sourceName="Watch"><FileReference path="/workout-routes/route_{i}.gpx"/></WorkoutRoute>\n'
                f'  <Note><![CDATA[felt <good> & fast]]></Note>\n </Workout>\n')
    if kind == 3:
        return (f' <ActivitySummary dateComponents="2026-01-01" activeEnergyBurned="{i % 700}" '
                f'activeEnergyBurnedGoal="500" activeEnergyBurnedUnit="Cal" appleExerciseTime="30"/>\n')
    return (f' <Record type="HKCategoryTypeIdentifierSleepAnalysis" sourceName="Sleep &quot;app&quot;" '
            f'creationDate="{start}" startDate="{start}" endDate="{start}" value="HKCategoryValueSleepAnalysisAsleepCore"/>\n')


def write_export(path, records=500, caffeine_every=10, first=0, invalid=True, sources=("Coffee Tracker", "Caffeine+"),
                 seconds_apart=20):
    """Writes an export of `records` top-level elements (every `caffeine_every`-th
    a caffeine record) and returns (drinks expected, counts). Record i is dated
    `seconds_apart` after the one before, from 2025-01-01 (at 20 s a million
    records stay in the past; at 5 s, ten million), so a later export holds
    the earlier one's records as they were."""
    base = datetime.datetime(2025, 1, 1, 6, 0, tzinfo=datetime.timezone.utc)
    offsets = [60, 345, -210, 0, 120]  # +0100, +0545, -0330, +0000, +0200
    drinks, counts = [], {"records": 0, "caffeineRecords": 0, "skipped": 0}
    with open(path, "w", encoding="utf-8") as out:
        out.write(PREAMBLE)
        chunk = []
        for i in range(first, first + records):
            when = base + datetime.timedelta(seconds=seconds_apart * i)
            offset = offsets[i % len(offsets)]
            start = export_date(when, offset)
            if i % caffeine_every == 0:
                source = sources[i % len(sources)]
                unit = "g" if i % 3 == 0 else "mg"
                value = f"{(0.064 + (i % 7) * 0.032):.3f}" if unit == "g" else f"{64 + (i % 7) * 32}"
                if invalid and i == first + caffeine_every * 3:
                    value, unit = "5000", "mg"  # over limits.maxMgCaffeine: skipped, listed in the summary
                    counts["skipped"] += 1
                elif invalid and i == first + caffeine_every * 5:
                    value, unit = "95", "mcg"  # a unit other than mg or g: skipped, never read as mg
                    counts["skipped"] += 1
                else:
                    drinks.append(expected_drink(source, start, value, unit, offset, when))
                chunk.append(caffeine_record(source, start, value, unit))
                counts["records"] += 1
                counts["caffeineRecords"] += 1
            else:
                text = other_records(i, start)
                chunk.append(text)
                counts["records"] += text.startswith(" <Record")
            if len(chunk) >= 10_000:
                out.write("".join(chunk))
                chunk = []
        out.write("".join(chunk))
        out.write("</HealthData>\n")
    return drinks, counts


def zip_export(xml_path, zip_path, force_zip64=False):
    with zipfile.ZipFile(zip_path, "w", compression=zipfile.ZIP_DEFLATED, allowZip64=True) as z:
        with open(xml_path, "rb") as source, z.open("apple_health_export/export.xml", "w", force_zip64=force_zip64) as entry:
            while block := source.read(1 << 20):
                entry.write(block)
        z.writestr("apple_health_export/export_cda.xml", "<ClinicalDocument/>")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--records", type=int, default=500)
    parser.add_argument("--caffeine-every", type=int, default=10)
    parser.add_argument("--zip")
    parser.add_argument("--zip64", action="store_true")
    args = parser.parse_args()
    drinks, counts = write_export(args.out, args.records, args.caffeine_every)
    if args.zip:
        zip_export(args.out, args.zip, args.zip64)
    print(f"{args.out}: {counts['records']} records, {len(drinks)} caffeine drinks")


if __name__ == "__main__":
    main()
