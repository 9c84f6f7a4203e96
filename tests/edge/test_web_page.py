"""The page at `/`, driven in Debian's headless chromium through chromedriver (selenium),
against the main server: translate, swap languages, detect, translate a file.

Chromium comes from Debian's packages (`chromium`, `chromium-driver`), which .ci/run
installs; where they are missing the test is skipped, unless TOLK_REQUIRE_BROWSER=1 (CI)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.select import Select
from selenium.webdriver.support.wait import WebDriverWait

from tests.support.servers import InProcessServer
from tolk.translation.files import FILE_TYPES

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)):
        if os.environ.get("TOLK_REQUIRE_BROWSER") == "1":
            pytest.fail("chromium and chromium-driver are required (apt-get install them)")
        pytest.skip("Debian's chromium and chromium-driver are not installed")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="tolk-chromium-")
    # No connections beyond loopback: this machine's network is closed.
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


def test_translate_swap_and_detect_in_a_browser(
    browser: webdriver.Chrome, edge_server: InProcessServer
) -> None:
    wait = WebDriverWait(browser, 60)
    browser.get(edge_server.url + "/")
    wait.until(lambda d: len(Select(d.find_element(By.ID, "target")).options) > 3)
    source = Select(browser.find_element(By.ID, "source"))
    target = Select(browser.find_element(By.ID, "target"))
    assert source.first_selected_option.get_attribute("value") == "auto"

    # Translate with the source detected.
    target.select_by_value("de")
    browser.find_element(By.ID, "input").send_keys("Hello, how are you today, my friend?")
    browser.find_element(By.ID, "translate").click()
    wait.until(lambda d: d.find_element(By.ID, "output").get_property("value"))
    assert browser.find_element(By.ID, "model").text == "demo"
    assert browser.find_element(By.ID, "detected").text.startswith("English")
    assert browser.find_element(By.ID, "timing").text.endswith(")")  # total and engine ms

    # Swap: the languages trade places, and so do the texts.
    source.select_by_value("en")
    target.select_by_value("fr")
    translated = browser.find_element(By.ID, "output").get_property("value")
    browser.find_element(By.ID, "swap").click()
    assert source.first_selected_option.get_attribute("value") == "fr"
    assert target.first_selected_option.get_attribute("value") == "en"
    assert browser.find_element(By.ID, "input").get_property("value") == translated

    # Detect: French text selects French as the source.
    box = browser.find_element(By.ID, "input")
    box.clear()
    box.send_keys("Bonjour à tous, comment allez-vous aujourd'hui ?")
    source.select_by_value("de")
    browser.find_element(By.ID, "detect").click()
    wait.until(lambda d: d.find_element(By.ID, "detected").text.startswith("French"))
    assert source.first_selected_option.get_attribute("value") == "fr"
    assert not browser.find_element(By.ID, "error").is_displayed()


def test_translate_a_file_in_a_browser(
    browser: webdriver.Chrome, edge_server: InProcessServer, tmp_path: Path
) -> None:
    """The file picker offers every type the server translates (from its settings), and a
    chosen file comes back as a download under its name."""
    wait = WebDriverWait(browser, 60)
    browser.get(edge_server.url + "/")
    picker = browser.find_element(By.ID, "file")
    wait.until(lambda d: picker.get_attribute("accept"))
    assert picker.get_attribute("accept") == ",".join(FILE_TYPES)
    assert ".pdf" in browser.find_element(By.ID, "file-hint").text
    wait.until(lambda d: len(Select(d.find_element(By.ID, "target")).options) > 3)
    Select(browser.find_element(By.ID, "target")).select_by_value("de")
    strings = tmp_path / "strings.json"
    strings.write_text(json.dumps({"greeting": "Hello, how are you today?"}), encoding="utf-8")
    picker.send_keys(str(strings))
    browser.find_element(By.ID, "file-translate").click()
    wait.until(lambda d: d.find_element(By.ID, "file-link").is_displayed())
    link = browser.find_element(By.ID, "file-link")
    assert link.text == "Download strings.json"
    assert link.get_attribute("download") == "strings.json"
    assert not browser.find_element(By.ID, "error").is_displayed()
