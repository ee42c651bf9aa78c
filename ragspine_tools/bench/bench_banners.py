"""How well the banner grammar reads real banners, and how often it fires on real text.

``python -m ragspine_tools.bench.bench_banners [corpus.jsonl ...]`` prints

* the accept rate on :data:`BANNERS` (phrasings of restricted-type markings that real
  documents carry: legal, corporate, government-style, Chinese) and on each of them
  placed as a Markdown first line and a DOCX page header line (the check that decides);
* the false-positive rate on :data:`NOT_BANNERS` (prose that mentions confidentiality,
  financial and XBRL names, titles);
* for each corpus (JSONL with ``title``/``text``), how many documents have a title, line
  or sentence the grammar reads as a banner (every sentence counts as a candidate line,
  harsher than the real check, which reads the first 20 lines), with the lines shown.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from ragspine_index.source_documents.sensitivity import first_marking, is_banner

#: Banners of restricted-type markings as documents carry them.
BANNERS = (
    "CONFIDENTIAL", "RESTRICTED", "SECRET", "TOP SECRET", "STRICTLY CONFIDENTIAL", "HIGHLY CONFIDENTIAL",
    "Highly Confidential", "PRIVILEGED & CONFIDENTIAL", "Privileged and Confidential", "DRAFT - CONFIDENTIAL",
    "Draft – Confidential", "Company Confidential", "COMPANY CONFIDENTIAL", "Confidential (Project X)",
    "Confidential (Project Nordvolt)", "Restricted distribution", "RESTRICTED DISTRIBUTION", "商业秘密", "保密",
    "仅限董事会", "Confidential", "Restricted", "**CONFIDENTIAL**", "*Confidential*", "[CONFIDENTIAL]",
    "(Confidential)", "CONFIDENTIAL – Q3 board pack", "Confidential - Do Not Distribute",
    "CONFIDENTIAL: DO NOT FORWARD", "Strictly Private & Confidential", "Private and Confidential",
    "Attorney-Client Privileged & Confidential", "ATTORNEY-CLIENT PRIVILEGED AND CONFIDENTIAL",
    "Confidential Information", "CONFIDENTIAL INFORMATION", "Confidential and Proprietary",
    "Proprietary & Confidential", "Business Confidential", "Commercial in Confidence",
    "Commercially Confidential", "Confidential – Internal Use Only", "Internal & Confidential",
    "Restricted – Need to Know", "Restricted Access", "Secret – Eyes Only", "Top Secret // Eyes Only",
    "Not for Distribution", "NOT FOR PUBLIC RELEASE", "Confidential | Board of Directors",
    "Board Confidential", "HR Confidential", "Client Confidential", "Confidential Draft",
    "Confidential document", "Restricted document", "Confidential.", "CONFIDENTIAL!",
    "机密", "绝密", "秘密", "【机密】", "【绝密】", "机密文件", "保密资料", "商业秘密 请勿外传", "秘密★请勿外传",
    "公司机密", "严格保密", "仅供收件人阅读", "仅限董事会成员阅读", "仅限管理层", "商密", "内部机密",
)
#: Lines that mention confidentiality (or look alike) but mark nothing.
NOT_BANNERS = (
    "Confidential information must be protected at all times.",
    "The memo was marked confidential by the legal team.",
    "us-gaap:RestrictedStockMember", "us-gaap:RestrictedStockUnitsRSUMember",
    "Restricted stock units vested in March 2024.", "Restricted cash and cash equivalents",
    "Secret Santa party on Friday", "Confidentiality Agreement", "Non-Disclosure and Confidentiality Agreement",
    "Internal use only", "This is a restricted area.", "Confidential computing explained",
    "Our policy on confidential data handling", "How to keep a secret from your manager",
    "Restrictions apply to the use of this software.", "The restricted partition holds HR files.",
    "Restricted Stock Awards", "Trade secrets are protected by law in most jurisdictions.",
    "The board discussed the confidentiality clause.", "Confidentiality of patient records",
    "保密协议的签署流程如下所述，请各部门配合。", "本公司高度重视商业秘密的保护工作。", "请注意保密义务的履行。",
    "仅限今日优惠", "秘密花园", "Top secret recipes for summer salads are in chapter 3.",
    "Restricted Boltzmann machines", "The Secret Garden", "Access to the data is restricted to approved researchers.",
)


def accept_rates() -> dict[str, float]:
    banner = sum(map(is_banner, BANNERS)) / len(BANNERS)
    placed = 0
    for line in BANNERS:
        md = first_marking([("line 1", line, "body"), ("line 2", "Northwind revenue rose.", "body")],
                            restricted_only=True)
        header = first_marking([("page header line 1", line, "body")], restricted_only=True)
        placed += (md is not None) + (header is not None)
    false = sum(first_marking([("line 1", line, "body")], restricted_only=True) is not None
                for line in NOT_BANNERS) / len(NOT_BANNERS)
    return {"banners": banner, "placed": placed / (2 * len(BANNERS)), "false_positives": false}


_SENTENCE = re.compile(r"(?<=[.!?。！？])\s*")


_MENTION = re.compile(r"confidential|restricted|secret|机密|秘密|保密|绝密|仅限", re.I)


def corpus_hits(path: Path, limit: int = 0) -> tuple[int, int, int, list[str]]:
    """``(documents, documents mentioning a marking word, documents with a banner, banner lines)``."""
    docs = hits = mentions = 0
    shown: list[str] = []
    with path.open(encoding="utf-8") as handle:
        for n, raw in enumerate(handle):
            if limit and n >= limit:
                break
            record = json.loads(raw)
            docs += 1
            mentions += bool(_MENTION.search((record.get("title") or "") + (record.get("text") or "")))
            lines = [record.get("title") or ""]
            for line in (record.get("text") or "").split("\n"):
                lines.append(line)
                lines += _SENTENCE.split(line)
            found = [line for line in lines if line.strip() and is_banner(line)]
            if found:
                hits += 1
                shown += found[:2]
    return docs, mentions, hits, shown


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpora", nargs="*", type=Path)
    args = parser.parse_args(argv)
    rates = accept_rates()
    print(f"banner corpus: {len(BANNERS)} banners, accepted {rates['banners']:.1%}; as a Markdown first line and "
          f"a DOCX header line: {rates['placed']:.1%} read as restricted")
    print(f"non-banners: {len(NOT_BANNERS)} lines, false positives {rates['false_positives']:.1%}")
    for path in args.corpora:
        docs, mentions, hits, shown = corpus_hits(path)
        print(f"{path}: {hits} of {docs} documents ({mentions} mention a marking word) have a line read as a "
              f"banner ({hits / max(docs, 1):.3%})")
        for line in shown[:10]:
            print(f"    {line[:100]!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
