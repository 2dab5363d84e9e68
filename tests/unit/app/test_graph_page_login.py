"""Logging in to the graph page: a POSTed key, a salted expiring cookie, no key in addresses."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from graphrt.http import graph_page
from graphrt.http.state import STATE

KEY = "page-key-unit-7c2f"


@pytest.fixture
async def client() -> AsyncIterator[TestClient[Any, Any]]:
    app = web.Application()
    state: Any = SimpleNamespace(
        settings=SimpleNamespace(api_key=KEY),
        repository=SimpleNamespace(servables={}, models={}),
    )
    app[STATE] = state
    graph_page.add_routes(app)
    async with TestClient(TestServer(app)) as test_client:
        yield test_client


async def test_the_page_answers_a_post_login_form(client: TestClient[Any, Any]) -> None:
    response = await client.get("/graphs/lv")
    assert response.status == 401
    text = await response.text()
    form = re.search(r"<form[^>]*>", text)
    assert form is not None
    assert 'method="post"' in form.group(0) and 'action="/graphs/login"' in form.group(0)
    assert 'name="api_key"' in text and 'name="next" value="/graphs/lv"' in text


async def test_a_key_in_the_query_string_is_not_accepted(client: TestClient[Any, Any]) -> None:
    response = await client.get("/graphs", params={"api_key": KEY}, allow_redirects=False)
    assert response.status == 401
    assert "set-cookie" not in response.headers
    assert not client.session.cookie_jar.filter_cookies(client.make_url("/graphs"))


async def test_posting_the_key_sets_a_salted_expiring_cookie_and_redirects(
    client: TestClient[Any, Any],
) -> None:
    response = await client.post(
        "/graphs/login", data={"api_key": KEY, "next": "/graphs/lv"}, allow_redirects=False
    )
    assert response.status == 303
    assert response.headers["Location"] == "/graphs/lv"
    header = response.headers["Set-Cookie"]
    assert "HttpOnly" in header and "SameSite=Strict" in header and "Path=/graphs" in header
    assert f"Max-Age={graph_page.COOKIE_SECONDS}" in header
    value = response.cookies[graph_page.COOKIE].value
    assert KEY not in value
    assert graph_page.cookie_valid(KEY, value)
    listing = await client.get("/graphs")  # the cookie jar now sends it
    assert listing.status == 200 and "graphrt graphs" in await listing.text()
    # a second login gets a different value: salted, not a function of the key alone
    again = await client.post("/graphs/login", data={"api_key": KEY}, allow_redirects=False)
    assert again.cookies[graph_page.COOKIE].value != value


async def test_a_wrong_key_gets_the_form_again_and_no_cookie(client: TestClient[Any, Any]) -> None:
    response = await client.post(
        "/graphs/login", data={"api_key": "wrong", "next": "/graphs"}, allow_redirects=False
    )
    assert response.status == 401 and "set-cookie" not in response.headers
    assert 'name="api_key"' in await response.text()


@pytest.mark.parametrize(
    "next_page", ["https://evil.example/", "//evil.example/graphs", "/v1/models", "/graphs\\x", ""]
)
async def test_login_only_sends_back_to_graph_pages(
    client: TestClient[Any, Any], next_page: str
) -> None:
    response = await client.post(
        "/graphs/login", data={"api_key": KEY, "next": next_page}, allow_redirects=False
    )
    assert response.status == 303 and response.headers["Location"] == "/graphs"


def test_cookies_expire_and_are_bound_to_the_key() -> None:
    value = graph_page.new_cookie(KEY, now=1000.0)
    assert graph_page.cookie_valid(KEY, value, now=1000.0 + graph_page.COOKIE_SECONDS - 1)
    assert not graph_page.cookie_valid(KEY, value, now=1000.0 + graph_page.COOKIE_SECONDS + 1)
    assert not graph_page.cookie_valid("other-key", value, now=1000.0)
    expires, salt, token = value.split(".")
    forged = f"{int(expires) + 10**6}.{salt}.{token}"  # a later expiry breaks the HMAC
    assert not graph_page.cookie_valid(KEY, forged, now=1000.0)
    for bad in ("", "x", "1.2", "a.b.c", KEY):
        assert not graph_page.cookie_valid(KEY, bad, now=1000.0)
