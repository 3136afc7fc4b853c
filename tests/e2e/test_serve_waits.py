"""Waiting endpoints of ``lcm serve``: answered when the work is done, with the work done.

Speed is measured by ``python -m bench waits``; here only what the answers say.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from tests import servers


def test_compact_wait_and_expand_query_answer_with_the_work_committed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _url, key = servers.embedded_home(home, "waits")
    env = {
        "LCM_HOME": str(home),
        "ANTHROPIC_API_KEY": "",
        "LCM_FRESH_TAIL_COUNT": "4",
        "LCM_LEAF_MIN_FANOUT": "4",
        "LCM_LEAF_CHUNK_TOKENS": "400",
    }
    serve = servers.start_serve(env, log=tmp_path / "serve.log")
    headers = {"Authorization": f"Bearer {key}"}
    try:
        with httpx.Client(base_url=serve.base_url, headers=headers, timeout=60) as http:
            messages = [
                {"role": "user" if i % 2 == 0 else "assistant", "content": f"deploy {i} " * 60}
                for i in range(24)
            ]
            assert http.post("/v1/conversations/w/messages", json={"messages": messages})
            r = http.post("/v1/conversations/w/compact", json={"wait": 30, "token_budget": 2000})
            assert r.status_code == 200, r.text
            out = r.json()
            assert out["status"] == "done"
            assert out["context_tokens_after"] < out["context_tokens_before"]
            status = http.get("/v1/conversations/w/status").json()
            assert status["debt"]["status"] == "done"
            assert status["summaries"]["0"] >= 2
            # Nothing left to do: the wait still answers done, for a sweep that saw it.
            again = http.post("/v1/conversations/w/compact", json={"wait": True}).json()
            assert again["status"] == "done"
            assert again["context_tokens_after"] == out["context_tokens_after"]
            answer = http.post(
                "/v1/expand-query",
                json={"prompt": "what was deployed?", "query": "deploy", "session_key": "w"},
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["offline"] is True
            assert answer.json()["cited_ids"]
    finally:
        serve.stop()
