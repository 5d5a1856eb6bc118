"""/docs in a real browser: Debian's headless Chromium, driven by selenium, against the real local
server (tests/live.py). Authorize with an API key, then "Try it out" + "Execute" on GET
/api/projects must show 200 and a page, sent to the server the page came from (the document's
first `servers` entry: docs/api/clients.md). The screenshot is kept in tests/artifacts/.

Run by `make test` (its live-server group) and `make browser-test` (both install chromium +
chromium-driver with apt-get when missing);
deselected elsewhere (tests/conftest.py). Without a browser it fails, saying what to install.
Chromium resolves no host name but loopback (--host-resolver-rules) and runs with its background
networking off: nothing leaves the machine.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.live import ROOT, LiveStack

pytestmark = pytest.mark.browser

ARTIFACTS = ROOT / 'tests' / 'artifacts'
CHROMIUM_FLAGS = ('--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage',
                  '--disable-background-networking', '--disable-component-update', '--no-first-run',
                  '--no-default-browser-check', '--disable-sync', '--disable-default-apps',
                  '--disable-domain-reliability', '--metrics-recording-only',
                  '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1', '--window-size=1400,1800')


def _binaries() -> tuple[str, str]:
    chromium = shutil.which('chromium') or shutil.which('chromium-browser')
    driver = shutil.which('chromedriver')
    if not chromium or not driver:
        pytest.fail('Chromium is not installed (need the Debian packages chromium and chromium-driver): run '
                    '`make browser-test`, which installs them with apt-get as root, or '
                    '`sudo apt-get install chromium chromium-driver`', pytrace=False)
    return chromium, driver


@pytest.fixture
def stack(tmp_path):
    live = LiveStack(tmp_path / 'state', LOCAL_WORKERS='off')
    yield live
    live.stop()


def chrome(profile: Path, *, window_size: str | None = None):
    """Debian's Chromium under chromedriver, headless with CHROMIUM_FLAGS (``window_size``, e.g.
    '1280,800', replacing theirs) and a fresh profile: the browser tests' one way to start it."""
    chromium, driver_path = _binaries()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROMIUM_FLAGS:
        if not (window_size and flag.startswith('--window-size')):
            options.add_argument(flag)
    if window_size:
        options.add_argument(f'--window-size={window_size}')
    options.add_argument(f'--user-data-dir={profile}')
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_page_load_timeout(60)
    return driver


@pytest.fixture
def browser(tmp_path):
    driver = chrome(tmp_path / 'profile')
    yield driver
    driver.quit()


def test_try_it_out_on_list_projects_answers_200_with_a_page(browser, stack):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait
    assert stack.created('/api/projects', {'name': 'seen-in-the-browser'})['id']
    wait = WebDriverWait(browser, 60)
    origin = f'http://127.0.0.1:{stack.port}'
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / 'docs-try-it-out.png'
    shot.unlink(missing_ok=True)
    try:
        browser.get(f'{origin}/docs')
        wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, '.swagger-ui .info .title')))
        # the servers dropdown offers this server first
        selected = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, '.servers select option')))
        assert selected.get_attribute('value') == origin

        browser.find_element(By.CSS_SELECTOR, 'button.authorize').click()
        section = wait.until(ec.visibility_of_element_located(
            (By.XPATH, "//div[contains(@class,'auth-container')][.//h4[contains(., 'ApiKeyAuth')]]")))
        section.find_element(By.CSS_SELECTOR, 'input').send_keys(stack.key)
        section.find_element(By.CSS_SELECTOR, 'button.authorize').click()
        wait.until(ec.visibility_of_element_located(
            (By.XPATH, "//div[contains(@class,'auth-container')][.//h4[contains(., 'ApiKeyAuth')]]"
                       "//button[contains(., 'Logout')]")))
        browser.find_element(By.CSS_SELECTOR, '.modal-ux button.btn-done, .modal-ux button.close-modal').click()

        block = wait.until(ec.presence_of_element_located((By.ID, 'operations-projects-listProjects')))
        browser.execute_script('arguments[0].scrollIntoView({block: "center"})', block)
        block.find_element(By.CSS_SELECTOR, '.opblock-summary-control, .opblock-summary').click()
        op = '#operations-projects-listProjects'
        wait.until(ec.element_to_be_clickable((By.CSS_SELECTOR, f'{op} button.try-out__btn'))).click()
        wait.until(ec.element_to_be_clickable((By.CSS_SELECTOR, f'{op} button.execute'))).click()
        answer = f'{op} .live-responses-table tr.response'
        status = wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, f'{answer} .response-col_status')))
        request_url = block.find_element(By.CSS_SELECTOR, '.request-url pre').text
        body = browser.find_element(By.CSS_SELECTOR, f'{answer} .response-col_description pre').text
        browser.execute_script('arguments[0].scrollIntoView({block: "start"})',
                               block.find_element(By.CSS_SELECTOR, '.responses-wrapper'))
    finally:
        browser.save_screenshot(str(shot))
    assert status.text.strip().startswith('200'), status.text
    assert request_url.startswith(f'{origin}/api/projects'), request_url
    page = json.loads(body)
    assert {'content', 'totalElements', 'number', 'size'} <= set(page)
    assert 'seen-in-the-browser' in [p['name'] for p in page['content']]
    assert Path(shot).stat().st_size > 10_000
