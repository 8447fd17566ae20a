#!/usr/bin/env python3
"""The live page's tap (docs/protocol.md §15) in headless Chromium, beside
the write it makes, in one invocation: for each of `--taps` taps on a drink
button, the time from the click to the page showing the model of that
drink's commit (the `anchor` it draws changes: the published model has
come over `/events`), and the time the browser's `POST /api/v1/drinks` took
to be answered (its Resource Timing entry, the same request). The ratio is
the first p99 over the second. Taps are 0.3 s apart: the model is published
at once after a commit that follows a quiet spell, and at most once per
`publish.modelIntervalMs` (100 ms) after that. Release build, loopback, no tokens (the
page's origin is the endpoint's own).

    python3 bench/page.py [--taps 200] [--out bench/page.json]
"""
import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service as Driver

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "clients" / "python"))
from consumers import Service  # noqa: E402

# One tap: click, then resolve when #anchor shows a new value; the POST's
# duration from its Resource Timing entry.
TAP = """
const done = arguments[arguments.length - 1];
const anchor = document.getElementById("anchor");
const before = anchor.textContent;
const button = document.querySelector('#drink-buttons .drink[data-type="singleEspresso"]');
const seen = performance.getEntriesByType("resource").length;
const started = performance.now();
const observer = new MutationObserver(() => {
  if (anchor.textContent === before) return;
  const shown = performance.now() - started;
  observer.disconnect();
  const wait = () => {
    const posts = performance.getEntriesByType("resource").slice(seen)
      .filter((e) => e.name.endsWith("/api/v1/drinks") && e.initiatorType === "fetch");
    if (posts.length === 0) { setTimeout(wait, 5); return; }
    done({shown: shown, answered: posts[0].responseEnd - posts[0].startTime});
  };
  wait();
});
observer.observe(anchor, {childList: true, characterData: true, subtree: true});
button.click();
"""


def p99(values):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", default=str(ROOT / ".build/release/coffee-tracker"))
    parser.add_argument("--taps", type=int, default=200)
    parser.add_argument("--out")
    args = parser.parse_args()
    options = Options()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    with tempfile.TemporaryDirectory(prefix="ct-page-") as d:
        service = Service(args.binary, Path(d))
        browser = webdriver.Chrome(service=Driver(shutil.which("chromedriver") or "/usr/bin/chromedriver"),
                                   options=options)
        try:
            browser.set_script_timeout(30)
            browser.get(f"http://{service.endpoints['http']}/")
            deadline = time.time() + 20
            while browser.find_element("id", "status").text != "live":
                if time.time() > deadline:
                    raise SystemExit("the page did not go live")
                time.sleep(0.05)
            browser.execute_script("performance.setResourceTimingBufferSize(100000)")
            shown, answered = [], []
            for k in range(args.taps):
                result = browser.execute_async_script(TAP)
                shown.append(result["shown"])
                answered.append(result["answered"])
                # A person's taps are seconds apart. Taps closer than the
                # model's round (publish.modelIntervalMs, 100 ms) would wait
                # for the round after (commits coalesce by design).
                time.sleep(0.3)
            stored = service.client.stats()["stored"]
            assert stored == args.taps, f"{stored} stored of {args.taps} taps"
        finally:
            browser.quit()
            service.stop()
    row = {"figure": f"a tap on the page to the model shown, {args.taps} taps",
           "tap_to_model_p99_ms": p99(shown), "post_answered_p99_ms": p99(answered),
           "tap_to_model_median_ms": statistics.median(shown), "post_answered_median_ms": statistics.median(answered),
           "ratio_p99": p99(shown) / p99(answered)}
    print(f"{'':44} {'median':>9} {'p99':>9}")
    print(f"{'tap to the model shown on the page':44} {row['tap_to_model_median_ms']:>7.1f}ms {row['tap_to_model_p99_ms']:>7.1f}ms")
    print(f"{'POST /api/v1/drinks answered':44} {row['post_answered_median_ms']:>7.1f}ms {row['post_answered_p99_ms']:>7.1f}ms")
    print(f"ratio of the p99s: {row['ratio_p99']:.2f}")
    if args.out:
        Path(args.out).write_text(json.dumps([row], indent=2) + "\n")


if __name__ == "__main__":
    main()
