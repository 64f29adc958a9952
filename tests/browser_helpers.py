"""A real headless Chromium (Debian's `chromium` and `chromium-driver`, which scripts/test
installs) driven by Selenium, for the memory browser's end-to-end tests and its screenshot."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM = Path(os.environ.get("OFFLINE_MEM_CHROMIUM", "/usr/bin/chromium"))
CHROMEDRIVER = Path(os.environ.get("OFFLINE_MEM_CHROMEDRIVER", "/usr/bin/chromedriver"))
# Without the background-networking flags Chromium tries to reach Google's hosts at start;
# the page under test is on loopback and nothing else may be contacted.
FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--window-size=1200,900",
]


@contextmanager
def chromium() -> Iterator[Any]:
    """A Selenium WebDriver on the system's Chromium, with a fresh profile, closed after."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        raise RuntimeError(
            f"{', '.join(missing)} not found: scripts/test installs Debian's chromium and "
            "chromium-driver (apt-get install chromium chromium-driver)"
        )
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must not look for drivers online
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    with tempfile.TemporaryDirectory(prefix="offline-mem-chromium-") as profile:
        options = webdriver.ChromeOptions()
        options.binary_location = str(CHROMIUM)
        for flag in [*FLAGS, f"--user-data-dir={profile}"]:
            options.add_argument(flag)
        driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
        try:
            yield driver
        finally:
            driver.quit()
