from __future__ import annotations

import json
import logging
import random
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from star_lib.synth import (
    LLMConfig,
    LLMRealiser,
    SynthConfig,
    build_messages,
    missing_mentions,
    realise_query,
)
from star_lib.synth.sample import sample_elements
from star_lib.types import LocalConstraint, QueryRecord

SECRET = "sk-test-do-not-log-1234"


def _records(world, n=90):
    levels = ("easy", "medium", "hard")
    cfg = SynthConfig()
    return [sample_elements(world, levels[i % 3], random.Random(f"r{i}"), cfg).record for i in range(n)]


def _record(**kw) -> QueryRecord:
    base = dict(
        org="Austin",
        dest="Texas",
        days=5,
        visiting_city_number=2,
        date=("2022-03-30", "2022-03-31", "2022-04-01", "2022-04-02", "2022-04-03"),
        people_number=4,
        local_constraint=LocalConstraint(
            house_rule="pets", cuisine=("Indian", "French"), transportation="no flight"
        ),
        budget=4200,
        level="hard",
    )
    base.update(kw)
    return QueryRecord(**base)


def test_realise_templates_mention_everything(small_world):
    for i, r in enumerate(_records(small_world)):
        text = realise_query(r, random.Random(i))
        assert missing_mentions(r, text) == [], text


def test_realise_templates_are_deterministic_per_seed(small_world):
    r = _records(small_world, 3)[2]
    assert realise_query(r, random.Random(5)) == realise_query(r, random.Random(5))


def test_realise_templates_vary_shape():
    r = _record()
    texts = {realise_query(r, random.Random(i)) for i in range(60)}
    assert len(texts) >= 50
    openings = {t.split(" from ")[0].split(" Austin")[0][:25] for t in texts}
    assert len(openings) >= 5
    assert any("four" in t for t in texts) and any(" 4 " in t for t in texts)
    date_styles = ["2022-03-30", "03/30/2022", "30 March 2022", "March 30th", "Wednesday, March 30"]
    assert all(any(style in t for t in texts) for style in date_styles)
    pets = {s for t in texts for s in t.split(". ") if "pet" in s.lower()}
    assert len(pets) >= 3


def test_realise_checker_catches_omissions():
    r = _record()
    full = (
        "Plan a trip from Austin to Texas from March 30th to April 3rd, 2022 for 4 people with $4,200. "
        "We bring pets, want Indian and French food, and would rather not fly."
    )
    assert missing_mentions(r, full) == []
    assert missing_mentions(r, full.replace("Indian and ", "")) == ["cuisine Indian"]
    assert missing_mentions(r, full.replace("$4,200", "some money")) == ["budget"]
    assert missing_mentions(r, full.replace("for 4 people ", "")) == ["people"]
    assert missing_mentions(r, full.replace("April 3rd", "April 4th")) == ["end date"]
    assert missing_mentions(r, full.replace("pets", "cats")) == ["house rule"]
    assert missing_mentions(r, full.replace("would rather not fly", "like trains")) == ["transportation"]
    assert missing_mentions(r, full.replace("Austin", "Dallas")) == ["origin"]


def test_realise_prompt_is_three_shot():
    messages = build_messages(_record())
    assert [m["role"] for m in messages] == ["system"] + ["user", "assistant"] * 3 + ["user"]
    assert json.loads(messages[-1]["content"])["budget"] == 4200


# ───────────────────────── a local OpenAI-compatible server ─────────────────────────


class _Server:
    """Answers /v1/chat/completions with scripted (status, content) pairs; records requests."""

    def __init__(self, script):
        self.script = list(script)
        self.requests = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server API
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(
                    {"path": self.path, "auth": self.headers.get("Authorization"), "body": body}
                )
                status, content = outer.script.pop(0) if outer.script else (200, "")
                payload = {
                    "id": "chatcmpl-test",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body.get("model"),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": content},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                }
                data = json.dumps(payload if status == 200 else {"error": {"message": "boom"}}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


GOOD = (
    "Hi! We're 4 friends leaving Austin to tour 2 cities in Texas from March 30th to April 3rd, 2022. "
    "Our budget is $4,200. We travel with pets, love Indian and French food, and we won't fly."
)


def _realiser(url, **kw):
    cfg = LLMConfig(base_url=url, model="tiny-test", api_key=SECRET, backoff_s=0.0, timeout_s=5.0, **kw)
    return LLMRealiser(cfg)


def test_realise_llm_accepts_a_complete_answer(caplog):
    with _Server([(200, GOOD)]) as server:
        realiser = _realiser(server.url)
        text = realiser.realise(_record(), random.Random(0))
    assert text == GOOD
    assert realiser.counts == {"requests": 1, "errors": 0, "rejected": 0, "accepted": 1, "fallback": 0}
    (req,) = server.requests
    assert req["path"] == "/v1/chat/completions"
    assert req["auth"] == f"Bearer {SECRET}"
    assert req["body"]["temperature"] == 0.7 and req["body"]["model"] == "tiny-test"
    assert len(req["body"]["messages"]) == 8


def test_realise_llm_rejected_answer_falls_back_to_template(caplog):
    record = _record()
    incomplete = "A nice trip from Austin to Texas in spring."
    with _Server([(200, incomplete), (200, incomplete)]) as server:
        realiser = _realiser(server.url, max_attempts=2)
        text = realiser.realise(record, random.Random(3))
    assert text == realise_query(record, random.Random(3))
    assert realiser.counts["rejected"] == 2 and realiser.counts["fallback"] == 1
    assert len(server.requests) == 2


def test_realise_llm_retries_errors_with_backoff_and_never_logs_the_key(caplog):
    waits = []
    with _Server([(500, ""), (503, ""), (200, GOOD)]) as server:
        cfg = LLMConfig(base_url=server.url, model="m", api_key=SECRET, backoff_s=0.5, max_attempts=3)
        realiser = LLMRealiser(cfg, sleep=waits.append)
        with caplog.at_level(logging.DEBUG):
            text = realiser.realise(_record(), random.Random(0))
    assert text == GOOD
    assert waits == [0.5, 1.0]
    assert realiser.counts["errors"] == 2 and realiser.counts["accepted"] == 1
    assert SECRET not in caplog.text and SECRET not in repr(realiser) and SECRET not in repr(cfg)


def test_realise_llm_config_reads_env_and_explains_gaps(monkeypatch):
    monkeypatch.setenv("STAR_LLM_BASE_URL", "http://localhost:9/v1")
    monkeypatch.setenv("STAR_LLM_MODEL", "env-model")
    monkeypatch.setenv("STAR_LLM_API_KEY", SECRET)
    cfg = LLMConfig()
    assert (cfg.base_url, cfg.model, cfg.api_key) == ("http://localhost:9/v1", "env-model", SECRET)
    monkeypatch.delenv("STAR_LLM_MODEL")
    with pytest.raises(ValueError, match="STAR_LLM_MODEL"):
        LLMConfig()
