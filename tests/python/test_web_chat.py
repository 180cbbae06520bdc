"""The chat page at / in headless Chromium (Debian's chromium + chromium-driver, Selenium): it loads from
the binary alone, streams a tool call from the trained toolcall model (reasoning folded, the call shown),
sends the tool's result back for the final answer, and a screenshot of it is not blank."""
import json
import os
import pathlib
import re
import shutil

import pytest
import requests
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from png_pixels import luminance_stats
from server_fixture import StrikerServer, module_server, toolcall_model  # noqa: F401  (fixtures)

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOLS = (ROOT / "examples/weather_tools.json").read_text()


@pytest.fixture(scope="module")
def server(striker_bin, toolcall_model, tmp_path_factory):  # noqa: F811
    yield from module_server(
        striker_bin, toolcall_model,
        ["--served-model-name", "toolcall", "--enable-auto-tool-choice", "--tool-call-parser", "glm47",
         "--reasoning-parser", "glm47", "--max-model-len", "1024", "--kv-cache-memory", "32MiB"], tmp_path_factory)


@pytest.fixture(scope="module")
def browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_bin = shutil.which("chromedriver")
    if not chromium or not driver_bin:
        pytest.fail("chromium and chromedriver are needed (Debian chromium, chromium-driver: scripts/install-deps.sh)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1100,760", "--disable-extensions"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=driver_bin), options=options)
    yield driver
    driver.quit()


def wait_for(driver, condition, timeout=60):
    return WebDriverWait(driver, timeout, poll_frequency=0.1).until(lambda d: condition())


def text_of(driver, selector):
    """Each match's textContent (Selenium's .text is empty inside a folded <details>), read in one
    script call, so elements re-rendered by the stream meanwhile cannot go stale."""
    return driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]), e => e.textContent);", selector)


def send(driver, text):
    driver.find_element(By.ID, "prompt").send_keys(text)
    driver.find_element(By.ID, "send").click()


def test_page_assets_are_served_from_the_binary(server):
    r = requests.get(server.url + "/", timeout=10)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/html")
    assert r.headers["Content-Security-Policy"] == "default-src 'self'"
    for asset, kind in (("/static/chat.js", "text/javascript"), ("/static/chat.css", "text/css"),
                        ("/static/favicon.svg", "image/svg+xml")):
        a = requests.get(server.url + asset, timeout=10)
        assert a.status_code == 200 and a.headers["Content-Type"].startswith(kind) and len(a.text) > 100
    for text in (r.text, requests.get(server.url + "/static/chat.js", timeout=10).text):
        assert "://" not in text  # nothing from another origin
    assert requests.get(server.url + "/static/nope.js", timeout=10).status_code == 404


def test_tool_call_streams_and_renders(server, browser, tmp_path):
    browser.get(server.url + "/")
    wait_for(browser, lambda: browser.find_element(By.ID, "model").text == "toolcall")
    temperature = browser.find_element(By.ID, "temperature")
    temperature.clear()
    temperature.send_keys("0")
    browser.execute_script("document.getElementById('tools').value = arguments[0];", TOOLS)

    send(browser, "What is the weather in Paris?")
    wait_for(browser, lambda: text_of(browser, ".tool-call .tool-name") == ["get_weather"])
    wait_for(browser, lambda: text_of(browser, ".msg.assistant .meta")[0].startswith("finish: "))
    assert re.fullmatch(r"finish: tool_calls · \d+ prompt \+ \d+ completion tokens",
                        text_of(browser, ".msg.assistant .meta")[0])
    assert json.loads(text_of(browser, ".tool-call .tool-args")[0][1:-1]) == {"city": "Paris"}
    reasoning = browser.find_element(By.CSS_SELECTOR, ".msg.assistant details.reasoning")
    assert reasoning.get_attribute("open") is None  # folded
    assert text_of(browser, ".msg.assistant .reasoning-text") == [
        "The user asks about the weather in Paris. I will call get_weather."]
    assert browser.find_element(By.ID, "tool-reply").is_displayed()
    assert browser.find_element(By.ID, "send").is_enabled() and not browser.find_element(By.ID, "stop").is_enabled()

    # The next message goes back as the tool's result, and the model answers from it.
    send(browser, json.dumps({"temp": 21, "condition": "sunny"}))
    wait_for(browser, lambda: len(text_of(browser, ".msg.assistant .meta")) == 2 and
             text_of(browser, ".msg.assistant .meta")[1].startswith("finish: stop"))
    assert text_of(browser, ".msg.assistant .content")[1] == "It is 21 degrees and sunny in Paris."
    assert text_of(browser, ".msg.tool .content") == ['{"temp": 21, "condition": "sunny"}']

    shot = tmp_path / "chat.png"
    assert browser.save_screenshot(str(shot))
    variance, colours = luminance_stats(shot.read_bytes())
    assert variance > 50 and colours > 20, f"screenshot {shot} looks blank: variance {variance:.1f}, {colours} colours"
    out_dir = os.environ.get("STRIKER_BUILD_DIR")
    if out_dir:  # kept for a human to look at
        shutil.copy(shot, pathlib.Path(out_dir) / "web_chat.png")


def test_stop_button_aborts_the_stream(striker_bin, toolcall_model, browser, tmp_path):  # noqa: F811
    """Random weights (--load-format dummy) almost never draw one of the 3 stop ids among 151552, so a
    1500-token answer is still streaming when Stop is clicked; the server sees the client go."""
    s = StrikerServer(striker_bin, toolcall_model, ["--served-model-name", "toolcall", "--load-format", "dummy",
                                                    "--max-model-len", "2048", "--kv-cache-memory", "32MiB"],
                      log_dir=tmp_path)
    try:
        browser.get(s.url + "/")
        wait_for(browser, lambda: browser.find_element(By.ID, "model").text == "toolcall")
        max_tokens = browser.find_element(By.ID, "max_tokens")
        max_tokens.clear()
        max_tokens.send_keys("1500")
        send(browser, "Tell me everything.")
        # Random tokens after the template's <think> all count as reasoning until a </think> is drawn.
        wait_for(browser, lambda: len("".join(text_of(browser, ".msg.assistant .reasoning-text, .msg.assistant .content"))) > 20)
        browser.find_element(By.ID, "stop").click()
        wait_for(browser, lambda: text_of(browser, ".msg.assistant .meta") == ["stopped"])
        assert browser.find_element(By.ID, "send").is_enabled()
        m = wait_for(browser, lambda: re.search(r'"POST /v1/chat/completions" 200 \S+ prompt_tokens=\d+ '
                                                r"completion_tokens=(\d+)", s.log()), timeout=30)
        assert int(m.group(1)) < 1500
    finally:
        s.stop()
