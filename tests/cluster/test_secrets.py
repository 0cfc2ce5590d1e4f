"""The token never shows, in any form a server or an encoder may give it back."""

from __future__ import annotations

import html
import json
import re
from urllib.parse import quote, quote_plus

import httpx
import pytest
from stub_broker import Answer, refusing, stub_broker

from shedlab.cluster.access import Retry, Token, scrub
from shedlab.cluster.readers import AdminReader
from shedlab.errors import ClusterError, InputError

# every character a token may have that JSON, a URL or HTML writes otherwise
TOKEN = "tok-a+b/c=d\"e\\f<g>&h'i j"


def encoded_forms(secret: str) -> dict[str, str]:
    return {
        "raw": secret,
        "json": json.dumps(secret)[1:-1],
        "json with \\/": json.dumps(secret)[1:-1].replace("/", "\\/"),
        "repr": repr(secret)[1:-1],
        "url": quote(secret, safe=""),
        "url, / kept": quote(secret),
        "form": quote_plus(secret),
        "url, lower-case hex": re.sub("%..", lambda m: m.group().lower(), quote(secret, safe="")),
        "url, some characters encoded": quote(secret, safe="+/=&'"),
        "httpx's URL of a path": httpx.URL(f"ftp://evil/{secret}").raw_path.decode()[1:],
        "html": html.escape(secret),
    }


@pytest.mark.parametrize("form", list(encoded_forms(TOKEN)))
def test_every_encoded_form_of_the_token_is_scrubbed(form: str) -> None:
    """Only the raw token was replaced: a server echoing the header JSON-escaped (a quote, a backslash),
    percent-encoded (``+``, ``/``, ``=``) or HTML-escaped had it printed in clear."""
    token = Token(TOKEN)
    shown = encoded_forms(TOKEN)[form]
    assert TOKEN not in shown or form == "raw"
    assert scrub(f"bad header Bearer {shown}!", token) == "bad header Bearer ***!"
    assert str(InputError("bad", value=shown)) == "bad (got '***')"


def _refusal(status: int, body: str) -> str:
    """The error of one read from a broker that answers every request ``status`` with ``body``."""
    with stub_broker(refusing, default=(status, body)) as url, pytest.raises(ClusterError) as caught:
        reader = AdminReader(url, token=Token(TOKEN), retry=Retry(attempts=1, timeout_s=5.0))
        try:
            reader.read()
        finally:
            reader.close()
    return str(caught.value)


@pytest.mark.parametrize("form", ["json", "url", "html"])
def test_a_token_echoed_encoded_in_an_error_body_is_not_printed(form: str) -> None:
    shown = encoded_forms(TOKEN)[form]
    body = f"<html>Bearer {shown}</html>" if form == "html" else json.dumps({"message": f"Bearer {TOKEN}"})
    if form == "url":
        body = f"bad header Bearer {shown}"

    text = _refusal(400, body)
    assert "HTTP 400" in text and "Bearer ***" in text
    assert not any(f in text for f in encoded_forms(TOKEN).values()), text


@pytest.mark.parametrize("padding", [120, 130, 139])
def test_a_token_echoed_across_the_cut_of_a_long_body_shows_no_part_of_it(padding: int) -> None:
    """A body without Pulsar's ``reason`` is shown cut to 160 characters; it was cut before the token was
    removed, so a token echoed across the cut lost its end and its start was printed."""
    body = json.dumps({"error": "x" * padding + f" Bearer {TOKEN}"})
    text = _refusal(500, body)
    assert "HTTP 500" in text and TOKEN[:2] not in text.rpartition("x")[2], text


def test_a_token_echoed_in_a_successful_answer_is_not_in_the_reading() -> None:
    """A broker that echoed the token in a 200 answer (listed as a broker id, in a field of its report)
    had it printed in advise's tables and JSON and written into collect's recording and events: only
    errors were redacted. The reading holds ``***`` in its place."""

    def echoing(path: str, port: int) -> dict[str, Answer]:
        return {
            "/admin/v2/clusters": (200, ["standalone"]),
            "/admin/v2/brokers/standalone": (200, [f"127.0.0.1:{port}", TOKEN]),
            "/admin/v2/broker-stats/load-report": (
                200,
                {"lastUpdate": 1, "brokerVersionString": f"v {TOKEN}"},
            ),
        }

    with stub_broker(echoing) as url:
        reader = AdminReader(url, token=Token(TOKEN), retry=Retry(attempts=1, timeout_s=5.0))
        try:
            reading = reader.read()
        finally:
            reader.close()
    text = json.dumps([reading.records(), reading.missing, reading.origin])
    assert not any(form in text for form in encoded_forms(TOKEN).values()), text
    assert "***" in reading.missing and "v ***" in text
