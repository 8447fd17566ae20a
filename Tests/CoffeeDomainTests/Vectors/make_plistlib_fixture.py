"""Writes CoffeeTracker-plistlib.plist: the watch app's file shape
(an array of {mgCaffeine: real, date: date, uuid: string}) made by Python's
plistlib rather than Foundation. Run: python3 make_plistlib_fixture.py"""
import datetime
import plistlib
from pathlib import Path

drinks = [
    {"mgCaffeine": 96.0, "date": datetime.datetime(2026, 11, 29, 12, 30, 0), "uuid": "6F1C3B1E-3F55-4B0B-9C1E-7A2D8E4B5C01"},
    {"mgCaffeine": 128.0, "date": datetime.datetime(2026, 11, 29, 9, 40, 0), "uuid": "0B8E5A52-1D2C-4C3F-8F6A-2E9B7D1C4A02"},
    {"mgCaffeine": 47.5, "date": datetime.datetime(2026, 11, 28, 23, 30, 15), "uuid": "d4e5f6a7-b8c9-4dae-9fb0-3b4c5d6e7f08"},
]
here = Path(__file__).parent
(here / "CoffeeTracker-plistlib.plist").write_bytes(plistlib.dumps(drinks, fmt=plistlib.FMT_BINARY))
(here / "CoffeeTracker-plistlib-xml.plist").write_bytes(plistlib.dumps(drinks, fmt=plistlib.FMT_XML))
