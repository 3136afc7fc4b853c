"""Odd input against every console route and the session cookie of a real ``lcm serve``.

Every case must answer below 500 with the console's security headers; a
number that is not ASCII digits within 64 bits, and text holding a NUL or a
lone surrogate, must answer a 400 HTML page (not a 500, not a 503, and not
read as some other number: U+0661 is not 1). The number of cases is printed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import quote

import httpx
import pytest

from tests import servers
from tests.e2e.test_console import csrf_token, login_token

# Numbers a client might send instead of an id, a page or an offset.
BAD_NUMBERS = [
    "²",
    "\u0661",  # ARABIC-INDIC DIGIT ONE: int() reads it as 1
    "\uff11",  # FULLWIDTH DIGIT ONE
    "9" * 30,
    "9223372036854775808",  # INT64_MAX + 1
    "9999999999999999999",
    "-1",
    "+1",
    "1_0",
    " 1",
    "1.0",
    "1e3",
    "0x10",
    "1\x00",
    "\x00",
    "é",
]
# Text with what no database stores faithfully.
BAD_TEXT = ["\x00", "a\x00b"]
ODD_TEXT = ["é", "\u202e", "\u200b", "'", '"<>&', "%", "\\", "x" * 2000, "..", "/"]
# Raw, already percent-encoded: a lone surrogate and bytes that are not UTF-8.
RAW_BAD = ["%ED%A0%80", "%FF", "%C0%80"]

HEADERS = {
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
}


@dataclass(frozen=True)
class FuzzServer:
    base: str
    key: str
    conversation_id: int


@dataclass
class Tally:
    cases: int = 0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FuzzServer]:
    home = tmp_path_factory.mktemp("console-fuzz-home")
    _, key = servers.embedded_home(home, "fuzz")
    handle = servers.start_serve({"LCM_HOME": str(home)}, log=home / "serve.log")
    try:
        with httpx.Client(
            base_url=handle.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=60
        ) as api:
            messages = [{"role": "user", "content": f"message {i}"} for i in range(3)]
            sent = api.post("/v1/conversations/fuzz/messages", json={"messages": messages})
            assert sent.status_code == 200, sent.text
        yield FuzzServer(handle.base_url, key, sent.json()["conversation_id"])
    finally:
        handle.stop()


@pytest.fixture(scope="module")
def tally() -> Iterator[Tally]:
    counted = Tally()
    yield counted
    print(f"\nconsole fuzz: {counted.cases} cases")


def _signed_in(server: FuzzServer) -> tuple[httpx.Client, str]:
    browser = httpx.Client(base_url=server.base, timeout=60)
    token = login_token(browser.get("/console/login").text)
    done = browser.post("/console/login", data={"api_key": server.key, "login_token": token})
    assert done.status_code == 303
    return browser, csrf_token(browser.get("/console/live").text)


def _check(tally: Tally, response: httpx.Response, refused: bool = False) -> None:
    tally.cases += 1
    where = f"{response.request.method} {response.request.url}"
    assert response.status_code < 500, f"{where}: {response.status_code} {response.text[:300]}"
    for name, value in HEADERS.items():
        assert response.headers.get(name) == value, f"{where}: {name}"
    policy = response.headers.get("content-security-policy", "")
    assert "frame-ancestors 'none'" in policy, where
    assert "'unsafe-inline'" not in policy, where
    assert "strict-transport-security" not in response.headers, f"{where}: HSTS over http"
    if refused:
        assert response.status_code == 400, f"{where}: {response.status_code}"
        assert response.headers["content-type"].startswith("text/html"), where
        assert 'class="error"' in response.text, where


def _get(client: httpx.Client, path: str, params: dict[str, str]) -> httpx.Response:
    query = "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in params.items())
    return client.get(f"{path}?{query}" if query else path)


def test_query_and_path_numbers(server: FuzzServer, tally: Tally) -> None:
    client, _ = _signed_in(server)
    c = server.conversation_id
    number_params = {
        "/console/conversations": ["page"],
        f"/console/conversations/{c}": ["budget", "runs_page", "level1"],
        f"/console/conversations/{c}/messages": ["seq", "start"],
        "/console/summaries/sum_x": ["offset"],
    }
    for path, names in number_params.items():
        for name in names:
            for value in BAD_NUMBERS:
                _check(tally, _get(client, path, {name: value}), refused=True)
    for value in BAD_NUMBERS:
        _check(tally, _get(client, f"/console/conversations/{c}", {f"level{value}": "1"}), True)
        _check(tally, _get(client, "/console/search", {"q": "x", "conversation": value}), True)
        # an empty search still reads its conversation field
        _check(tally, _get(client, "/console/search", {"conversation": value}), True)
        for path in ("/console/conversations/{}", "/console/conversations/{}/messages"):
            _check(tally, client.get(path.format(quote(value, safe=""))), refused=True)
    for value in BAD_NUMBERS:  # text-typed and choice parameters: refused or answered
        for path, name in [
            ("/console/conversations", "sort"),
            ("/console/conversations", "order"),
            ("/console/search", "mode"),
            ("/console/search", "scope"),
        ]:
            _check(tally, _get(client, path, {name: value}))


def test_query_and_path_text(server: FuzzServer, tally: Tally) -> None:
    client, _ = _signed_in(server)
    text_params = [
        ("/console/conversations", "prefix"),
        ("/console/search", "q"),
        ("/console/live", "done"),
    ]
    for path, name in text_params:
        for value in BAD_TEXT:
            _check(tally, _get(client, path, {name: value}), refused=True)
        for value in ODD_TEXT:
            _check(tally, _get(client, path, {name: value}))
        for raw in RAW_BAD:
            _check(tally, client.get(f"{path}?{name}={raw}"), refused=True)
    for value in BAD_TEXT:
        _check(tally, client.get(f"/console/summaries/{quote(value, safe='')}"), refused=True)
    for value in ODD_TEXT:
        _check(tally, client.get(f"/console/summaries/{quote(value, safe='')}"))
    for raw in RAW_BAD:
        _check(tally, client.get(f"/console/summaries/{raw}"), refused=True)
        _check(tally, client.get(f"/console/conversations/{raw}"), refused=True)
    for path in ("/console", "/console/nothing", "/console/static/nothing.js"):
        _check(tally, client.get(path))
    _check(tally, client.get("/console/static/console.js"))


def test_forms(server: FuzzServer, tally: Tally) -> None:
    client, csrf = _signed_in(server)
    for path in ("/console/live/compact", "/console/live/retry"):
        for value in BAD_NUMBERS:
            form = {"csrf_token": csrf, "conversation_id": value}
            _check(tally, client.post(path, data=form), refused=True)
        _check(tally, client.post(path, data={"csrf_token": csrf}), refused=True)
        for token in [*BAD_NUMBERS, *ODD_TEXT]:  # a wrong CSRF token: 403, never a 500
            refused = client.post(path, data={"csrf_token": token, "conversation_id": "1"})
            _check(tally, refused)
            assert refused.status_code == 403
    for value in [*BAD_TEXT, *ODD_TEXT, *BAD_NUMBERS]:
        fresh = httpx.Client(base_url=server.base, timeout=60)
        token = login_token(fresh.get("/console/login").text)
        _check(tally, fresh.post("/console/login", data={"api_key": value, "login_token": token}))
        _check(tally, fresh.post("/console/login", data={"api_key": value, "login_token": value}))
    _check(tally, client.post("/console/logout", data={"csrf_token": "é"}))


def _cookies(server: FuzzServer) -> list[str]:
    key_part = ["1", "0", "9" * 30, "9223372036854775808", "²", "\u0661", "-1", "", "1\x00"]
    shapes = [f"ten_x.{k}.1.a.b" for k in key_part]
    shapes += [f"ten_x.1.{t}.a.b" for t in key_part]
    shapes += [
        "",
        ".",
        "....",
        "a.b",
        "ten_x.1.1.a",
        "ten_x.1.1.a.b.c",
        "ten_x..1.a.b",
        "\x00.1.1.a.b",
        "ten_\x00.1.1.a.b",
        "tén.1.1.a.b",
        "ten_x.1.1.a.é",
        "ten_x.1.1.a.\u202e",
        "x" * 5000,
        ".".join(["1"] * 200),
        '"ten_x.1.1.a.\\000"',  # a quoted cookie's octal escape decodes to NUL
        '"\\303\\251.1.1.a.b"',
    ]
    return shapes


def test_cookie_shapes(server: FuzzServer, tally: Tally) -> None:
    for shape in _cookies(server):
        raw = quote(shape, safe="")  # what a client can put in a Cookie header
        # as sent, percent-encoded, and as raw UTF-8 bytes in the header
        for value in (shape.encode(), raw.encode()) if "\x00" not in shape else (raw.encode(),):
            headers = {b"Cookie": b"lcm_console=" + value}
            with httpx.Client(base_url=server.base, timeout=60, headers=headers) as client:
                page = client.get("/console/conversations")
                _check(tally, page)
                assert page.status_code == 303
                assert page.headers["location"] == "/console/login"
                posted = client.post("/console/live/compact", data={"conversation_id": "1"})
                _check(tally, posted)
                assert posted.status_code == 401
