"""Rebuild the real-document benchmark set (issue 38) from ``files.tsv``: files written by
others, from public repositories' test and sample corpora, pinned by commit and sha256.

    python benchmarks/real_documents/rebuild.py OUT [--mirrors DIR]

Each row of ``files.tsv`` is ``repo  commit  path  sha256  bytes``. A file is read with
``git show <commit>:<path>`` from ``DIR/<owner>+<name>/repo`` (a local mirror) when
``--mirrors`` is given, else from a bare clone of ``https://github.com/<repo>`` made under
``OUT/.clones``. Every file's sha256 is checked; the set is written to
``OUT/<owner>+<name>/<path>``. Then: ``ragspine bench --documents OUT``.

``--list`` adds to ``files.tsv`` the files of the repos in ``REPOS`` it does not list yet,
from the mirrors (the suffixes below, under each repo's folder, every N-th file in path
order where a corpus is large), for maintainers; rows already listed keep their commit.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
LIST = HERE / "files.tsv"
#: The corpora (not Unstructured-IO's example-docs, kept for an independent check).
#: repo -> (folder, every N-th file): textract's test documents (one text in every format a
#: user has, images and legacy Office included), xlrd's sample workbooks, and every 10th
#: file of Apache POI's test-data (Office files from bug reports: legacy .doc/.xls/.ppt,
#: Outlook .msg, OOXML; many deliberately damaged or encrypted).
REPOS = {"py-pdf/sample-files": ("", 1), "python-openxml/python-docx": ("", 1), "scanny/python-pptx": ("", 1),
         "pdfminer/pdfminer.six": ("", 1), "deanmalmgren/textract": ("tests", 1),
         "python-excel/xlrd": ("tests/samples", 1), "apache/poi": ("test-data", 10)}
SUFFIXES = (".pdf", ".docx", ".pptx", ".xlsx", ".html", ".htm", ".csv", ".odt", ".ods", ".odp", ".rtf", ".epub",
            ".eml", ".msg", ".doc", ".xls", ".ppt")
#: Images (OCR) are listed from the repos added with them (the first four were listed without).
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
_WITHOUT_IMAGES = ("py-pdf/sample-files", "python-openxml/python-docx", "scanny/python-pptx", "pdfminer/pdfminer.six")
MAX_BYTES = 20 * 1024 * 1024


def _git(repo_dir: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo_dir), *args], check=True, capture_output=True, timeout=600).stdout


def _repo_dir(repo: str, mirrors: Path | None, out: Path) -> Path:
    if mirrors is not None:
        return mirrors / repo.replace("/", "+") / "repo"
    clone = out / ".clones" / repo.replace("/", "+")
    if not clone.exists():
        subprocess.run(["git", "clone", "--bare", "--filter=blob:none", f"https://github.com/{repo}", str(clone)],
                       check=True, timeout=1800)
    return clone


def write_list(mirrors: Path) -> int:
    rows = LIST.read_text(encoding="utf-8").splitlines()[1:] if LIST.exists() else []
    listed = {row.split("\t", 1)[0] for row in rows}
    for repo, (under, every) in REPOS.items():
        if repo in listed:
            continue
        repo_dir = mirrors / repo.replace("/", "+") / "repo"
        commit = _git(repo_dir, "rev-parse", "HEAD").decode().strip()
        suffixes = SUFFIXES + (() if repo in _WITHOUT_IMAGES else IMAGE_SUFFIXES)
        candidates = []
        for line in _git(repo_dir, "ls-tree", "-r", "-l", commit, *([under] if under else [])).decode(
                "utf-8", "replace").splitlines():
            meta, path = line.split("\t", 1)
            size = meta.split()[3]
            if path.lower().endswith(suffixes) and size.isdigit() and int(size) <= MAX_BYTES:
                candidates.append(path)
        for path in sorted(candidates)[::every]:
            data = _git(repo_dir, "show", f"{commit}:{path}")
            if data.startswith(b"version https://git-lfs"):
                continue
            rows.append(f"{repo}\t{commit}\t{path}\t{hashlib.sha256(data).hexdigest()}\t{len(data)}")
    LIST.write_text("repo\tcommit\tpath\tsha256\tbytes\n" + "\n".join(rows) + "\n", encoding="utf-8")
    print(f"{len(rows)} files listed in {LIST}")
    return 0


def rebuild(out: Path, mirrors: Path | None) -> int:
    rows = [line.split("\t") for line in LIST.read_text(encoding="utf-8").splitlines()[1:] if line.strip()]
    bad = 0
    for repo, commit, path, digest, _ in rows:
        data = _git(_repo_dir(repo, mirrors, out), "show", f"{commit}:{path}")
        if hashlib.sha256(data).hexdigest() != digest:
            print(f"sha256 differs: {repo} {path}", file=sys.stderr)
            bad += 1
            continue
        target = out / repo.replace("/", "+") / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    print(f"{len(rows) - bad} of {len(rows)} files written under {out}")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", help="folder to write the set into")
    parser.add_argument("--mirrors", type=Path, default=None, help="local mirrors: DIR/<owner>+<name>/repo")
    parser.add_argument("--list", action="store_true", help="write files.tsv anew from --mirrors")
    args = parser.parse_args(argv)
    if args.list:
        if args.mirrors is None:
            parser.error("--list needs --mirrors")
        return write_list(args.mirrors)
    if not args.out:
        parser.error("give the output folder")
    return rebuild(Path(args.out), args.mirrors)


if __name__ == "__main__":
    raise SystemExit(main())
