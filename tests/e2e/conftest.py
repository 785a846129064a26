"""Fixtures of the end-to-end tests that drive a browser: Debian's Chromium through Playwright
(never a downloaded browser), one per test module."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator

import pytest
from playwright.async_api import Browser, async_playwright

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless=new",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
LAPTOP = {"width": 1366, "height": 900}


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    assert shutil.which(CHROMIUM), "Debian's chromium is missing: apt-get install -y chromium"
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        await launched.close()
