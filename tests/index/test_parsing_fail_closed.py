"""Issue 9, leak-proof parsing: errors never quote content, sensitivity fails closed,
symlinks never leave the library, and paths stay printable.

Every test here drives the public API (``parse_library``, ``parse_document``,
``default_doc_id``) so it can be run against an older parser for comparison.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragspine_index.source_documents.metadata import default_doc_id
from ragspine_index.source_documents.model import SourceDocument
from ragspine_index.source_documents.parse_library import parse_library
from ragspine_index.source_documents.text_files import parse_document
from ragspine_core.errors import DocumentError

GOOD = "---\ndoc_id: good\ntitle: A good document\n---\nGood body text.\n"
#: A word that only ever appears in document content: no error message may contain it.
MARKER = "ZQXMARKERWORD"


def _library(root: Path, files: dict[str, str | bytes]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return root


def _errors_for(result, name: str) -> list[DocumentError]:
    return [e for e in result.errors if e.path.split("#", 1)[0] == name]


def _assert_printable(text: str) -> None:
    assert text.isprintable(), repr(text)


# --------------------------------------------------------------------------- 1. no content in errors


CONTENT_IN_ERRORS: dict[str, str | bytes] = {
    "key-with-space.md": f"---\n{MARKER} and more words: x\n---\nBody",
    "no-colon.md": f"---\ndoc_id: x\n{MARKER} is a line without a colon\n---\nBody",
    "empty-key.md": f"---\ndoc_id: x\n: {MARKER}\n---\nBody",
    "non-ascii-key.md": f"---\n{MARKER}é: x\n---\nBody",
    "long-sensitivity.md": f"---\nsensitivity: {MARKER} was here\n---\nBody",
    "long-sensitivity-word.md": f"---\nsensitivity: {MARKER}-LONGER-STILL\n---\nBody",  # > 20 characters
    "date-words.md": f"---\nvalid_as_of: {MARKER}\n---\nBody",
    "utf8.md": f"---\ndoc_id: u\n---\n{MARKER} \xff".encode("utf-8").replace(b"\xc3\xbf", b"\xff"),
    "text-list.jsonl": json.dumps({"doc_id": "t", "text": [MARKER, "more"]}) + "\n",
    "title-object.jsonl": json.dumps({"doc_id": "t", "text": "x", "title": {MARKER: 1}}) + "\n",
    "period-number.jsonl": '{"doc_id": "t", "text": "x", "period": 987654321}\n',
    "bad-key.jsonl": json.dumps({"doc_id": "t", "text": "x", f"{MARKER} key": "v"}) + "\n",
    "bad-json.jsonl": f'{{"doc_id": "t", {MARKER}\n',
}


@pytest.mark.parametrize("name", sorted(CONTENT_IN_ERRORS))
def test_error_messages_never_quote_document_content(tmp_path, name):
    root = _library(tmp_path / "lib", {name: CONTENT_IN_ERRORS[name], "good.md": GOOD})
    result = parse_library(root)
    assert [d.doc_id for d in result.documents] == ["good"]
    errors = _errors_for(result, name)
    assert errors, result.errors
    for error in errors:
        message = str(error)
        assert MARKER not in message and MARKER.lower() not in message.lower(), message
        assert "987654321" not in message and "\\xff" not in message, message
        assert name in message


def test_a_short_sensitivity_word_and_a_digits_only_date_are_still_named(tmp_path):
    root = _library(tmp_path / "lib", {"s.md": "---\nsensitivity: Top-Secret\nvalid_as_of: 2024-13-01\n---\nBody"})
    messages = " ".join(str(e) for e in parse_library(root).errors)
    assert "'Top-Secret'" in messages and "'2024-13-01'" in messages


def test_a_duplicate_doc_id_is_quoted_only_when_it_is_a_plain_identifier(tmp_path):
    weird = f"{MARKER} with spaces"
    root = _library(
        tmp_path / "lib",
        {
            "a.md": f"---\ndoc_id: {weird}\n---\nFirst.",
            "b.md": f"---\ndoc_id: {weird}\n---\nSecond.",
            "c.md": "---\ndoc_id: plain-id_1\n---\nThird.",
            "d.md": "---\ndoc_id: plain-id_1\n---\nFourth.",
        },
    )
    errors = {e.path: str(e) for e in parse_library(root).errors}
    assert MARKER not in errors["b.md"] and "a.md" in errors["b.md"] and "already used" in errors["b.md"]
    assert "'plain-id_1'" in errors["d.md"]


# --------------------------------------------------------------------------- 2. sensitivity fails closed


#: name -> content; every one tries to set a sensitivity that is not parsed exactly.
FAIL_CLOSED_MD: dict[str, str | bytes] = {
    "fence-trailing-space": f"--- \nsensitivity: RESTRICTED\n---\n{MARKER}\n",
    "fence-trailing-tab": f"---\t\nsensitivity: RESTRICTED\n---\n{MARKER}\n",
    "fence-leading-space": f" ---\nsensitivity: RESTRICTED\n---\n{MARKER}\n",
    "fence-yaml-tag": f"---yaml\nsensitivity: RESTRICTED\n---\n{MARKER}\n",
    "fence-full-width": f"－－－\nsensitivity: RESTRICTED\n－－－\n{MARKER}\n",
    "toml-fence": f'+++\nsensitivity = "RESTRICTED"\n+++\n{MARKER}\n',
    "blank-line-first": f"\n---\nsensitivity: RESTRICTED\n---\n{MARKER}\n",
    "whitespace-line-first": f"  \n---\nsensitivity: RESTRICTED\n---\n{MARKER}\n",
    "two-boms": f"\ufeff\ufeff---\nsensitivity: RESTRICTED\n---\n{MARKER}\n",
    "bom-then-blank": f"\ufeff\n---\nsensitivity: RESTRICTED\n---\n{MARKER}\n",
    "closing-fence-space": f"---\nsensitivity: RESTRICTED\n--- \n{MARKER}\n",
    "closing-fence-indented": f"---\nsensitivity: RESTRICTED\n  ---\n{MARKER}\n",
    "fence-duplicated": f"---\n---\ndoc_id: x\nsensitivity: RESTRICTED\n---\n{MARKER}\n",
    "cr-line-endings": f"---\rsensitivity: RESTRICTED\r---\r{MARKER}\r",
    "key-capitalised": f"---\nSensitivity: RESTRICTED\n---\n{MARKER}\n",
    "key-upper": f"---\nSENSITIVITY: RESTRICTED\n---\n{MARKER}\n",
    "key-dashed": f"---\nsensi-tivity: RESTRICTED\n---\n{MARKER}\n",
    "key-misspelt": f"---\nsensitivty: RESTRICTED\n---\n{MARKER}\n",
    "key-cyrillic-e": f"---\nsеnsitivity: RESTRICTED\n---\n{MARKER}\n",
    "key-full-width": f"---\nｓｅｎｓｉｔｉｖｉｔｙ: RESTRICTED\n---\n{MARKER}\n",
    "key-zero-width": f"---\nsensi\u200btivity: RESTRICTED\n---\n{MARKER}\n",
    "key-classification": f"---\nclassification: RESTRICTED\n---\n{MARKER}\n",
    "key-confidentiality": f"---\nConfidentiality: high\n---\n{MARKER}\n",
    "key-security-level": f"---\nsecurity_level: RESTRICTED\n---\n{MARKER}\n",
    "key-chinese": f"---\n密级: 机密\n---\n{MARKER}\n",
    "key-indented": f"---\n  sensitivity: RESTRICTED\n---\n{MARKER}\n",
    "key-nested": f"---\nmeta:\n  sensitivity: RESTRICTED\n---\n{MARKER}\n",
    "key-twice": f"---\nsensitivity: RESTRICTED\nsensitivity: PUBLIC\n---\n{MARKER}\n",
    "key-commented-out": f"---\n# sensitivity: RESTRICTED\n---\n{MARKER}\n",
    "value-empty": f"---\nsensitivity:\n---\n{MARKER}\n",
    "value-empty-quotes": f'---\nsensitivity: ""\n---\n{MARKER}\n',
    "value-bang": f"---\nsensitivity: RESTRICTED!\n---\n{MARKER}\n",
    "value-ish": f"---\nsensitivity: restricted-ish\n---\n{MARKER}\n",
    "value-comment": f"---\nsensitivity: PUBLIC # was RESTRICTED\n---\n{MARKER}\n",
    "value-mismatched-quotes": f"---\nsensitivity: \"RESTRICTED'\n---\n{MARKER}\n",
    "value-spaced-letters": f"---\nsensitivity: R E S T R I C T E D\n---\n{MARKER}\n",
    "value-full-width": f"---\nsensitivity: ＲＥＳＴＲＩＣＴＥＤ\n---\n{MARKER}\n",
    "value-dotless-i": f"---\nsensitivity: publıc\n---\n{MARKER}\n",
    "value-folded": f"---\nsensitivity: >\n  RESTRICTED\n---\n{MARKER}\n",
    "value-literal": f"---\nsensitivity: |\n  RESTRICTED\n---\n{MARKER}\n",
    "value-list": f"---\nsensitivity: [RESTRICTED]\n---\n{MARKER}\n",
    "value-null": f"---\nsensitivity: ~\n---\n{MARKER}\n",
    "value-line-separator": f"---\nsensitivity: PUBLIC\u2028RESTRICTED\n---\n{MARKER}\n",
    "body-assignment": f"Quarterly plan\nsensitivity: RESTRICTED\n\n{MARKER}\n",
    "body-bold": f"**Sensitivity:** Restricted\n\n{MARKER}\n",
    "body-heading": f"# Classification = Confidential\n\n{MARKER}\n",
    "body-banner": f"CONFIDENTIAL — DO NOT DISTRIBUTE\n\n{MARKER}\n",
    "body-banner-word": f"**Restricted**\n\n{MARKER}\n",
    "body-status-value": f"Status: restricted\n\n{MARKER}\n",
    "body-after-front-matter": f"---\ndoc_id: x\n---\nsensitivity: RESTRICTED\n{MARKER}\n",
    "body-chinese": f"密级：机密\n\n{MARKER}\n",
    "title-swallowed-it": f"---\ntitle: Plan sensitivity: RESTRICTED\n---\n{MARKER}\n",
    "metadata-mentions-it": f"---\ntitle: Confidential memo\n---\n{MARKER}\n",
    "public-but-banner": f"---\nsensitivity: PUBLIC\n---\nCONFIDENTIAL\n{MARKER}\n",
    "internal-but-body-says-restricted": f"---\nsensitivity: INTERNAL\n---\n---\nsensitivity: RESTRICTED\n---\n{MARKER}\n",
}


@pytest.mark.parametrize("name", sorted(FAIL_CLOSED_MD))
def test_an_inexact_sensitivity_is_an_error_never_the_default(tmp_path, name):
    rel = f"{name}.md"
    root = _library(tmp_path / "lib", {rel: FAIL_CLOSED_MD[name], "good.md": GOOD})
    result = parse_library(root)
    assert [d.doc_id for d in result.documents] == ["good"], [(d.doc_id, d.sensitivity) for d in result.documents]
    errors = _errors_for(result, rel)
    assert errors, result.errors
    assert all(e.field in {"sensitivity", "front_matter"} for e in errors), errors


def test_sensitivity_key_errors_are_reported_under_the_sensitivity_field(tmp_path):
    files = {f"{n}.md": FAIL_CLOSED_MD[n] for n in ("key-capitalised", "key-misspelt", "value-empty", "body-banner")}
    result = parse_library(_library(tmp_path / "lib", files))
    assert sorted((e.path, e.field) for e in result.errors) == sorted((rel, "sensitivity") for rel in files)
    message = str(_errors_for(result, "key-capitalised.md")[0])
    assert "'Sensitivity'" in message and "exactly" in message


@pytest.mark.parametrize(
    "line",
    ["sensitivity: RESTRICTED", "sensitivity: restricted", "sensitivity:  Restricted ", "sensitivity: 'RESTRICTED'",
     'sensitivity: "restricted"', "sensitivity :RESTRICTED", "sensitivity:\tRESTRICTED"],
)
def test_exact_spellings_of_restricted_are_accepted(line):
    doc = parse_document(f"---\n{line}\n---\n{MARKER}\n".encode(), "ok.md", "lib")
    assert isinstance(doc, SourceDocument) and doc.sensitivity == "RESTRICTED"


def test_a_utf8_bom_before_an_exact_fence_is_still_front_matter():
    doc = parse_document(b"\xef\xbb\xbf---\r\nsensitivity: RESTRICTED\r\n---\r\nText.", "bom.md", "lib")
    assert isinstance(doc, SourceDocument) and doc.sensitivity == "RESTRICTED"


@pytest.mark.parametrize(
    "text",
    [
        "---\nsensitivity: PUBLIC\n---\nSensitivity: 50 mV/g\n",  # explicit: no default involved
        "---\nsensitivity: RESTRICTED\n---\nCONFIDENTIAL\nClassification: PUBLIC\n",  # RESTRICTED: never read
        "Sensitivity analysis shows a 2% swing.\nPrice sensitivity is high.\n",  # prose, no marking
        "Restricted stock units vest over three years.\n",
        "---\nsensitivity: PUBLIC\ntitle: Confidential\ntopic: secret\n---\nText.\n",  # known fields' values
        "\n".join(["line"] * 20) + "\nsensitivity: RESTRICTED\n",  # beyond the first 20 non-blank lines
    ],
)
def test_what_does_not_count_as_a_marking(text):
    doc = parse_document(text.encode(), "ok.md", "lib")
    assert isinstance(doc, SourceDocument), doc


JSONL_FAIL_CLOSED: dict[str, str] = {
    "key-capitalised": json.dumps({"doc_id": "j", "Sensitivity": "RESTRICTED", "text": MARKER}),
    "key-twice": '{"doc_id": "j", "sensitivity": "RESTRICTED", "sensitivity": "PUBLIC", "text": "%s"}' % MARKER,
    "key-twice-normalised": '{"doc_id": "j", "sensitivity": "PUBLIC", "SENSITIVITY": "RESTRICTED", "text": "%s"}'
    % MARKER,
    "key-padded": json.dumps({"doc_id": "j", " sensitivity": "RESTRICTED", "text": MARKER}),
    "key-classification": json.dumps({"doc_id": "j", "classification": "RESTRICTED", "text": MARKER}),
    "key-cyrillic": json.dumps({"doc_id": "j", "sеnsitivity": "RESTRICTED", "text": MARKER}, ensure_ascii=False),
    "value-null": json.dumps({"doc_id": "j", "sensitivity": None, "text": MARKER}),
    "value-list": json.dumps({"doc_id": "j", "sensitivity": ["RESTRICTED"], "text": MARKER}),
    "value-empty": json.dumps({"doc_id": "j", "sensitivity": "  ", "text": MARKER}),
    "value-nested": json.dumps({"doc_id": "j", "meta": {"sensitivity": "RESTRICTED"}, "text": MARKER}),
    "in-text": json.dumps({"doc_id": "j", "text": f"Sensitivity: RESTRICTED\n{MARKER}"}),
    "doc-id-dashed": json.dumps({"doc-id": "j", "text": MARKER}),
}


@pytest.mark.parametrize("name", sorted(JSONL_FAIL_CLOSED))
def test_jsonl_inexact_sensitivity_is_an_error(tmp_path, name):
    rel = f"{name}.jsonl"
    root = _library(tmp_path / "lib", {rel: JSONL_FAIL_CLOSED[name] + "\n", "good.md": GOOD})
    result = parse_library(root)
    assert [d.doc_id for d in result.documents] == ["good"], [(d.doc_id, d.sensitivity) for d in result.documents]
    assert _errors_for(result, rel), result.errors


# --------------------------------------------------------------------------- 2b. property: mutations never leak


MD_LINES = ["---", "doc_id: prop-doc", "title: Quarterly plan", "sensitivity: RESTRICTED", "topic: strategy", "---",
            "# Plan", "", f"{MARKER} body text."]
WHITESPACE = [" ", "\t", "\u00a0", "\u3000", "\u200b", "\ufeff", "\r", "  ", "\u2028", "\x0b"]
JUNK = ["!", "#", " # was PUBLIC", "-ish", ".", "*", "**", '"', "'", ">", "|", "[", "]", ":", "=", "\\", "x", ",",
        ";", "…", "_", "-", "PUBLIC", " ", "`"]
INSERTED_LINES = ["", "   ", "# comment", "#", "\t", "\ufeff", "<!-- note -->", "---", "----", "title: extra"]
QUOTES = ['"', "'", "`", "“", "”", "«", "»"]
LOOKALIKES = {
    "e": "еｅėê", "i": "іıｉí", "s": "ѕｓś", "t": "тｔ", "c": "сｃ", "o": "оο０", "a": "аａ", "r": "гｒ", "n": "ոｎ",
    "v": "νｖ", "y": "уｙ", "R": "ＲᎡ", "E": "ЕΕＥ", "S": "ЅＳ", "T": "ТΤＴ", "I": "ІΙＩ1l", "C": "СＣ", "D": "ＤᎠ",
    "-": "‐‑–—－−", ":": "：∶꞉",
}

_index = st.integers(min_value=0, max_value=1000)
MD_MUTATION = st.one_of(
    st.tuples(st.just("ws"), _index, _index, st.sampled_from(WHITESPACE)),
    st.tuples(st.just("case"), _index, _index, st.integers(1, 12), st.sampled_from(["upper", "lower", "swap", "title"])),
    st.tuples(st.just("dup"), _index),
    st.tuples(st.just("insert"), _index, st.sampled_from(INSERTED_LINES)),
    st.tuples(st.just("bom")),
    st.tuples(st.just("endings"), st.sampled_from(["\r\n", "\r", "mixed"])),
    st.tuples(st.just("quote"), _index, st.sampled_from(QUOTES), st.sampled_from(QUOTES)),
    st.tuples(st.just("junk"), _index, _index, st.sampled_from(JUNK)),
    st.tuples(st.just("lookalike"), _index, _index),
    st.tuples(st.just("indent"), _index, st.sampled_from([" ", "  ", "\t"])),
    st.tuples(st.just("join"), _index),  # a lost line break
)


def _case(text: str, mode: str) -> str:
    return {"upper": str.upper, "lower": str.lower, "swap": str.swapcase, "title": str.title}[mode](text)


def _apply_md(lines: list[str], ops) -> tuple[list[str], str, bool]:
    lines = list(lines)
    ending, bom = "\n", False
    for op in ops:
        kind = op[0]
        if kind == "bom":
            bom = True
            continue
        if kind == "endings":
            ending = op[1]
            continue
        i = op[1] % len(lines)
        line = lines[i]
        if kind == "ws":
            pos = op[2] % (len(line) + 1)
            lines[i] = line[:pos] + op[3] + line[pos:]
        elif kind == "case":
            pos = op[2] % (len(line) + 1)
            lines[i] = line[:pos] + _case(line[pos : pos + op[3]], op[4]) + line[pos + op[3] :]
        elif kind == "dup":
            lines.insert(i, line)
        elif kind == "insert":
            lines.insert(op[1] % (len(lines) + 1), op[2])
        elif kind == "quote":
            key, colon, value = line.partition(":")
            if colon:
                lines[i] = f"{key}: {op[2]}{value.strip()}{op[3]}"
        elif kind == "junk":
            pos = op[2] % (len(line) + 1)
            lines[i] = line[:pos] + op[3] + line[pos:]
        elif kind == "lookalike":
            if line:
                pos = op[2] % len(line)
                options = LOOKALIKES.get(line[pos], "")
                if options:
                    lines[i] = line[:pos] + options[op[2] % len(options)] + line[pos + 1 :]
        elif kind == "indent":
            lines[i] = op[2] + line
        elif kind == "join" and i + 1 < len(lines):
            lines[i : i + 2] = [line + lines[i + 1]]
    if ending == "mixed":
        text = "".join(line + ("\r\n" if n % 2 else "\n") for n, line in enumerate(lines))
    else:
        text = ending.join(lines) + ending
    return lines, ("\ufeff" if bom else "") + text, bom


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(MD_MUTATION, min_size=1, max_size=4))
def test_mutated_restricted_front_matter_is_restricted_or_an_error(ops):
    _, text, _ = _apply_md(MD_LINES, ops)
    result = parse_document(text.encode("utf-8"), "prop.md", "lib")
    if isinstance(result, SourceDocument):
        assert result.sensitivity == "RESTRICTED", (text, result.sensitivity)
    else:
        assert result and all(e.path == "prop.md" for e in result), result
        assert all(MARKER not in str(e) for e in result), result


JSON_BASE = [("doc_id", "prop-j"), ("title", "Plan"), ("sensitivity", "RESTRICTED"), ("text", f"{MARKER} body")]
JSON_MUTATION = st.one_of(
    st.tuples(st.just("key_ws"), _index, _index, st.sampled_from(WHITESPACE)),
    st.tuples(st.just("key_case"), _index, _index, st.integers(1, 12), st.sampled_from(["upper", "lower", "swap", "title"])),
    st.tuples(st.just("key_junk"), _index, _index, st.sampled_from(["-", "_", ".", " ", "s", ":"])),
    st.tuples(st.just("key_lookalike"), _index, _index),
    st.tuples(st.just("value_ws"), _index, st.sampled_from(WHITESPACE)),
    st.tuples(st.just("value_case"), st.sampled_from(["upper", "lower", "swap", "title"])),
    st.tuples(st.just("value_junk"), _index, st.sampled_from(JUNK)),
    st.tuples(st.just("value_quote"), st.sampled_from(QUOTES), st.sampled_from(QUOTES)),
    st.tuples(st.just("value_lookalike"), _index),
    st.tuples(st.just("value_type"), st.sampled_from([None, 3, ["RESTRICTED"], {"level": "RESTRICTED"}, True])),
    st.tuples(st.just("dup_pair"), _index, st.sampled_from(["sensitivity", "Sensitivity", "SENSITIVITY", "sensitivity "]),
              st.sampled_from(["PUBLIC", "INTERNAL", "", "RESTRICTED"])),
    st.tuples(st.just("nest")),
    st.tuples(st.just("to_text"), st.sampled_from(["sensitivity: RESTRICTED", "Sensitivity = restricted",
                                                   "**Classification:** RESTRICTED", "RESTRICTED"])),
    st.tuples(st.just("ascii"), st.booleans()),
    st.tuples(st.just("bom")),
    st.tuples(st.just("crlf")),
    st.tuples(st.just("dup_line")),
)


def _mutate_str(text: str, op) -> str:
    kind = op[0].split("_", 1)[1]
    if kind == "ws":
        pos = op[2] % (len(text) + 1)
        return text[:pos] + op[3] + text[pos:]
    if kind == "case":
        pos = op[2] % (len(text) + 1)
        return text[:pos] + _case(text[pos : pos + op[3]], op[4]) + text[pos + op[3] :]
    if kind == "junk":
        pos = op[2] % (len(text) + 1)
        return text[:pos] + op[3] + text[pos:]
    if kind == "lookalike" and text:
        pos = op[2] % len(text)
        options = LOOKALIKES.get(text[pos], "")
        return text[:pos] + options[op[2] % len(options)] + text[pos + 1 :] if options else text
    return text


def _jsonl_line(pairs) -> str:
    parts = []
    for key, value in pairs:
        parts.append(f"{json.dumps(key, ensure_ascii=False)}: {json.dumps(value, ensure_ascii=False)}")
    return "{" + ", ".join(parts) + "}"


def _apply_jsonl(ops) -> bytes:
    pairs = [list(p) for p in JSON_BASE]
    ascii_, bom, crlf, dup_line = False, False, False, False
    sens: int | None = 2  # index of the (mutated) sensitivity pair; None once it is gone
    for op in ops:
        kind = op[0]
        if sens is None and kind.startswith(("key_", "value_")):
            continue
        if kind in ("key_ws", "key_case", "key_junk", "key_lookalike"):
            pairs[sens][0] = _mutate_str(pairs[sens][0], op)
        elif kind == "value_ws" and isinstance(pairs[sens][1], str):
            v = pairs[sens][1]
            pos = op[1] % (len(v) + 1)
            pairs[sens][1] = v[:pos] + op[2] + v[pos:]
        elif kind == "value_case" and isinstance(pairs[sens][1], str):
            pairs[sens][1] = _case(pairs[sens][1], op[1])
        elif kind == "value_junk" and isinstance(pairs[sens][1], str):
            v = pairs[sens][1]
            pos = op[1] % (len(v) + 1)
            pairs[sens][1] = v[:pos] + op[2] + v[pos:]
        elif kind == "value_quote" and isinstance(pairs[sens][1], str):
            pairs[sens][1] = op[1] + pairs[sens][1] + op[2]
        elif kind == "value_lookalike" and isinstance(pairs[sens][1], str):
            pairs[sens][1] = _mutate_str(pairs[sens][1], ("v_lookalike", None, op[1]))
        elif kind == "value_type":
            pairs[sens][1] = op[1]
        elif kind == "dup_pair":
            at = op[1] % (len(pairs) + 1)
            pairs.insert(at, [op[2], op[3]])
            if sens is not None and at <= sens:
                sens += 1
        elif kind == "nest" and sens is not None:
            pairs[sens] = ["meta", {pairs[sens][0]: pairs[sens][1]}]
            sens = None
        elif kind == "to_text" and sens is not None:
            pairs.pop(sens)
            sens = None
            text_pair = next((p for p in pairs if p[0] == "text"), None)
            if text_pair is not None and isinstance(text_pair[1], str):
                text_pair[1] = op[1] + "\n\n" + text_pair[1]
        elif kind == "ascii":
            ascii_ = op[1]
        elif kind == "bom":
            bom = True
        elif kind == "crlf":
            crlf = True
        elif kind == "dup_line":
            dup_line = True
    if ascii_:
        line = "{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in pairs) + "}"
    else:
        line = _jsonl_line(pairs)
    end = "\r\n" if crlf else "\n"
    text = ("\ufeff" if bom else "") + line + end + (line + end if dup_line else "")
    return text.encode("utf-8")


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(JSON_MUTATION, min_size=1, max_size=4))
def test_mutated_restricted_jsonl_is_restricted_or_an_error(ops):
    data = _apply_jsonl(ops)
    with tempfile.TemporaryDirectory() as tmp:
        root = _library(Path(tmp) / "lib", {"prop.jsonl": data})
        result = parse_library(root)
    assert result.documents or result.errors
    for doc in result.documents:
        assert doc.sensitivity == "RESTRICTED", (data, doc.sensitivity)
    assert all(e.path.startswith("prop.jsonl") for e in result.errors), result.errors
    assert all(MARKER not in str(e) for e in result.errors), result.errors


# --------------------------------------------------------------------------- 3. symlinks


def _symlink(link: Path, target: str | Path, *, directory: bool = False) -> None:
    try:
        os.symlink(target, link, target_is_directory=directory)
    except (OSError, NotImplementedError) as exc:  # pragma: no cover - platforms without symlinks
        pytest.skip(f"symlinks are not available here: {exc}")


def test_a_file_symlink_that_leaves_the_library_is_an_error_not_a_document(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "system.txt").write_text(f"{MARKER} system file\n")
    root = _library(tmp_path / "lib", {"good.md": GOOD, "sub/keep.md": "Kept."})
    _symlink(root / "leak.txt", outside / "system.txt")  # absolute
    _symlink(root / "sub" / "relative.md", "../../outside/system.txt")  # relative
    _symlink(root / "chain.md", "sub/relative.md")  # inside link → outside link
    result = parse_library(root)
    assert sorted(d.doc_id for d in result.documents) == ["good", "sub-keep"]
    assert all(MARKER not in d.body for d in result.documents)
    errors = {e.path: e for e in result.errors}
    assert sorted(errors) == ["chain.md", "leak.txt", "sub/relative.md"]
    for error in errors.values():
        message = str(error)
        assert "symbolic link to a location outside the library" in message and "copy the file" in message
        assert "outside" not in message.replace("outside the library", "") and "system" not in message


def test_a_folder_symlink_that_leaves_is_an_error_and_one_inside_is_listed_as_skipped(tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "secret.md").write_text(f"{MARKER}\n")
    root = _library(tmp_path / "lib", {"good.md": GOOD, "real/a.md": "A."})
    _symlink(root / "out", outside, directory=True)
    _symlink(root / "alias", "real", directory=True)
    result = parse_library(root)
    assert sorted(d.doc_id for d in result.documents) == ["good", "real-a"]
    assert [(e.path, e.field) for e in result.errors] == [("out", "path")]
    assert "outside the library" in str(result.errors[0]) and "elsewhere" not in str(result.errors[0])
    assert result.skipped == ("alias/",)


def test_file_symlinks_inside_the_library_are_followed_unless_hidden_or_broken(tmp_path):
    root = _library(tmp_path / "lib", {"real/a.md": "Visible.", "_private/b.md": f"{MARKER} hidden."})
    _symlink(root / "alias.md", "real/a.md")
    _symlink(root / "peek.md", "_private/b.md")
    _symlink(root / "broken.md", "missing.md")
    result = parse_library(root)
    by_id = {d.doc_id: d for d in result.documents}
    assert sorted(by_id) == ["alias", "real-a"] and by_id["alias"].body == "Visible."
    assert sorted((e.path, e.field) for e in result.errors) == [("broken.md", "path"), ("peek.md", "path")]
    assert all(MARKER not in str(e) and "_private" not in str(e) for e in result.errors)


# --------------------------------------------------------------------------- 4./5. printable paths and ids


def test_a_newline_in_a_file_name_is_escaped_in_every_path_string(tmp_path):
    root = tmp_path / "lib"
    root.mkdir()
    try:
        (root / "Q1\nplan.md").write_text("Plan body.\n")
        (root / "bad\x1bname.md").write_bytes(b"")
    except OSError as exc:  # pragma: no cover - file systems that refuse such names
        pytest.skip(f"cannot create the file name here: {exc}")
    result = parse_library(root)
    [doc] = result.documents
    assert doc.source_path == doc.source_locator == "Q1%0Aplan.md"
    assert doc.title == "Q1%0Aplan" and doc.doc_id == "q1-plan"
    [error] = result.errors
    assert error.path == "bad%1Bname.md"
    for text in (doc.source_path, doc.source_locator, doc.title, doc.doc_id, str(error)):
        _assert_printable(text)


def test_default_doc_id_drops_control_characters():
    assert default_doc_id("a\x1bb\x00c.md") == "abc"
    assert default_doc_id("x/\u202eevil\u200b.md") == "x-evil"
    assert default_doc_id("a\nb.md") == "a-b"


@pytest.mark.parametrize(
    ("name", "content", "field"),
    [
        ("loc-cr.md", "---\nsource_locator: https://x\r/y\n---\nBody", "front_matter"),
        ("id-rtl.md", "---\ndoc_id: abc\u202edef\n---\nBody", "doc_id"),
        ("id-zwsp.md", "---\ndoc_id: abc\u200b\n---\nBody", "doc_id"),
        ("loc.jsonl", json.dumps({"doc_id": "j", "text": "x", "source_locator": "a\nb"}) + "\n", "source_locator"),
        ("id.jsonl", json.dumps({"doc_id": "j\u0007", "text": "x"}) + "\n", "doc_id"),
    ],
)
def test_control_characters_in_doc_id_or_source_locator_are_errors(tmp_path, name, content, field):
    result = parse_library(_library(tmp_path / "lib", {name: content, "good.md": GOOD}))
    assert [d.doc_id for d in result.documents] == ["good"]
    [error] = _errors_for(result, name)
    assert error.field == field
    _assert_printable(str(error).replace("\n", ""))
