"""The memory browser at `/` end to end, in a real headless Chromium against a running
`offline-mem serve`: what the API stored shows in the page with its sources and history, an
edit and a delete made in the page are what the API then answers, a wrong token is refused."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from browser_helpers import chromium
from server_helpers import Running, serve

pytestmark = pytest.mark.network_local

FACT = "User keeps two hives of bees"
WAIT_S = 20


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    db = tmp_path_factory.mktemp("browser") / "memory.db"
    with serve(db, facts=[FACT]) as running:
        yield running


@pytest.fixture  # per test: loopback is allowed only inside a network_local test
def browser() -> Iterator[Any]:
    with chromium() as driver:
        yield driver


@pytest.fixture
def api(server: Running) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


def wait_for(browser: Any, condition: Any) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, WAIT_S).until(condition)


def open_page(browser: Any, server: Running, user_id: str, token: str | None = None) -> None:
    from selenium.webdriver.common.by import By

    browser.get(f"{server.url}/#token={token or server.token}")
    field = browser.find_element(By.ID, "user_id")
    field.clear()
    field.send_keys(user_id)


def raw_add(api: httpx.Client, text: str, user_id: str) -> list[dict[str, Any]]:
    body = {"messages": [{"role": "user", "content": text}], "user_id": user_id, "infer": False}
    return list(api.post("/memories", json=body).json()["results"])


def item_texts(browser: Any) -> list[str]:
    """The listed items' texts, read in one script (the list may be re-rendered meanwhile)."""
    script = "return [...document.querySelectorAll('#results .item .text')].map(e => e.textContent)"
    return list(browser.execute_script(script))


def test_what_the_api_stored_is_listed_and_searched_with_its_sources(
    server: Running, browser: Any, api: httpx.Client
) -> None:
    from selenium.webdriver.common.by import By

    said = "I have two beehives behind the shed"
    added = api.post("/memories", json={"messages": [{"role": "user", "content": said}],
                                        "user_id": "ana"})  # fmt: skip
    assert added.status_code == 200, added.text
    api.post("/memories", json={"messages": [{"role": "user", "content": "I sail on Sundays"}],
                                "user_id": "bob", "infer": False})  # fmt: skip
    open_page(browser, server, "ana")
    browser.find_element(By.ID, "list").click()
    wait_for(browser, lambda b: FACT in item_texts(b))
    assert "I sail on Sundays" not in item_texts(browser)  # another scope's memory
    query = browser.find_element(By.ID, "query")
    query.send_keys("bees")
    browser.find_element(By.ID, "search").click()
    wait_for(browser, lambda b: "sources:" in b.find_element(By.ID, "results").text)
    assert said in browser.find_element(By.ID, "results").text


def test_an_edit_in_the_page_is_what_the_api_answers_and_shows_in_history(
    server: Running, browser: Any, api: httpx.Client
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions

    [added] = raw_add(api, "I bake bread", "cy")
    open_page(browser, server, "cy")
    browser.find_element(By.ID, "list").click()
    wait_for(browser, lambda b: "I bake bread" in item_texts(b))
    row = browser.find_element(By.ID, f"item-{added['id']}")
    row.find_element(By.CLASS_NAME, "edit").click()
    prompt = wait_for(browser, expected_conditions.alert_is_present())
    prompt.send_keys("I bake sourdough bread")
    prompt.accept()
    wait_for(browser, lambda b: "I bake sourdough bread" in item_texts(b))
    assert api.get(f"/memories/{added['id']}").json()["memory"] == "I bake sourdough bread"
    row = browser.find_element(By.ID, f"item-{added['id']}")
    row.find_element(By.CLASS_NAME, "history").click()
    wait_for(
        browser, lambda b: b.find_elements(By.CSS_SELECTOR, f"#item-{added['id']} .history-row")
    )
    history = [e.text for e in row.find_elements(By.CLASS_NAME, "history-row")]
    assert [h.split()[1] for h in history] == ["ADD", "UPDATE"]
    assert "I bake bread → I bake sourdough bread" in history[1]


def test_a_delete_in_the_page_is_gone_from_the_api(
    server: Running, browser: Any, api: httpx.Client
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions

    [added] = raw_add(api, "I own a kayak", "dee")
    open_page(browser, server, "dee")
    browser.find_element(By.ID, "list").click()
    wait_for(browser, lambda b: "I own a kayak" in item_texts(b))
    browser.find_element(By.ID, f"item-{added['id']}").find_element(By.CLASS_NAME, "delete").click()
    wait_for(browser, expected_conditions.alert_is_present()).accept()  # "Delete ...?"
    wait_for(browser, lambda b: not b.find_elements(By.ID, f"item-{added['id']}"))
    assert api.get(f"/memories/{added['id']}").status_code == 404
    assert api.get("/memories", params={"user_id": "dee"}).json()["results"] == []


def test_a_wrong_token_is_refused_in_the_page(server: Running, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    open_page(browser, server, "ana", token="not-the-token")
    browser.find_element(By.ID, "list").click()
    wait_for(browser, lambda b: b.find_element(By.ID, "status").text)
    assert browser.find_element(By.ID, "status").text.startswith("Unauthorized")
    assert item_texts(browser) == []
