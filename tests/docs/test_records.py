"""A documented number that cites a record (``0.955 <!-- record: toy self-attention -->``)
must be that record's value as written, and a record of parameter counts must still be what
its configs build (tests/docs/records.py describes the format)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .recorder import RecordingError, record
from .records import (
    COMMIT,
    RECORDS,
    ROOT,
    BlockCitation,
    Citation,
    RecordError,
    block_citations,
    citations,
    count_numbers,
    documents,
    load_records,
    main,
    parameter_count,
    read_record,
    split_sizes,
    unbacked,
    unbacked_sections,
)

RECORDED = load_records()
CITED = [c for path in documents() for c in citations(path)]
QUOTED = [b for path in documents() for b in block_citations(path)]
COUNTED = [(r.id, key) for r in RECORDED.values() for key in r.models]


def test_the_documents_cite_records() -> None:
    assert len(RECORDED) >= 8 and len(CITED) >= 40
    cited_files = {Path(c.where.split(":")[0]).name for c in CITED}
    assert {"README.md", "results.md"} <= cited_files


def test_every_citation_is_its_record_value() -> None:
    wrong = []
    for c in CITED:
        record = RECORDED.get(c.record)
        if record is None:
            wrong.append(f"{c.where}: no record {c.record!r} in docs/records/")
        elif c.key not in record.values:
            wrong.append(f"{c.where}: record {c.record!r} has no value {c.key!r}")
        elif not c.matches(record.values[c.key]):
            wrong.append(
                f"{c.where}: {c.number}{c.unit} but {c.record}.{c.key} is {record.values[c.key]}"
            )
    assert not wrong, "\n".join(wrong)


def test_every_quoted_output_holds_its_record_values() -> None:
    inline = {(c.record, c.key) for c in CITED}
    wrong = []
    for block in QUOTED:
        record = RECORDED.get(block.record)
        if record is None:
            wrong.append(f"{block.where}: no record {block.record!r} in docs/records/")
            continue
        values = {k: v for k, v in record.values.items() if (record.id, k) not in inline}
        for key in block.missing(values):
            wrong.append(f"{block.where}: the block lacks {block.record}.{key} = {values[key]}")
    assert QUOTED and not wrong, "\n".join(wrong)


def test_every_record_is_cited() -> None:
    cited = {(c.record, c.key) for c in CITED}
    cited |= {(b.record, key) for b in QUOTED for key in RECORDED[b.record].values}
    unused = [
        f"{r.id}.{key}" for r in RECORDED.values() for key in r.values if (r.id, key) not in cited
    ]
    assert not unused, f"values no document cites: {unused}"


@pytest.mark.parametrize(("record", "key"), COUNTED, ids=[f"{r}.{k}" for r, k in COUNTED])
def test_recorded_parameter_counts_are_what_the_configs_build(record: str, key: str) -> None:
    entry = RECORDED[record]
    assert parameter_count(entry.models[key]) == entry.values[key], (
        f"{entry.path.relative_to(ROOT)}: {entry.models[key]['config']} no longer builds "
        f"{entry.values[key]:.0f} parameters: measure it again with its command"
    )


@pytest.mark.parametrize(
    ("number", "unit", "value", "expected"),
    [
        ("9.45", " M", 9_454_977, True),
        ("9.46", " M", 9_454_977, False),
        ("12.21", " M", 9_454_977, False),
        ("191", "k", 191_424, True),
        ("65,761", "", 65_761, True),
        ("65,760", "", 65_761, False),
        ("0.9337", "", 0.9337, True),
        ("0.934", "", 0.9337, True),
        ("0.933", "", 0.9337, False),
        ("1.000", "", 1.0, True),
        ("65.2", " s", 65.2, True),
    ],
)
def test_a_number_matches_its_value_rounded_to_the_digits_written(
    number: str, unit: str, value: float, expected: bool
) -> None:
    citation = Citation("README.md:1", number, unit, "r", "k")
    assert citation.matches(value) is expected


def test_markers_are_read_from_prose_not_code(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "a 9.45 M <!-- record: params transformer --> model and 31.5 s <!-- record: toy "
        "seconds -->\n```text\n0.1 <!-- record: toy fc -->\n```\n"
        "`0.2 <!-- record: toy fc -->`\n",
        encoding="utf-8",
    )
    found = [(c.where, c.number, c.unit.strip(), c.record, c.key) for c in citations(page)]
    where = f"{page}:1"
    assert found == [
        (where, "9.45", "M", "params", "transformer"),
        (where, "31.5", "s", "toy", "seconds"),
    ]


def test_a_quoted_block_cites_by_the_line_before_its_fence(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "text\n<!-- record: tour -->\n```text\nepoch 3 accuracy 0.7023 (7.1 s, 30,990 tokens/s)\n"
        "```\n\n<!-- record: other -->\n\n```text\n0.5\n```\n",
        encoding="utf-8",
    )
    (block,) = block_citations(page)  # a blank line between comment and fence cites nothing
    assert (block.where, block.record) == (f"{page}:2", "tour")
    assert block.numbers == ["3", "0.7023", "7.1", "30,990"]
    assert block.missing({"dev": 0.70234, "tokens": 30990, "loss": 0.5584}) == ["loss"]
    assert BlockCitation("x:1", "r", ["0.7023"]).missing({"dev": 0.7024}) == ["dev"]


GOOD = {
    "id": "r",
    "command": "selfattn toy --threads 1",
    "commit": "8818096",
    "date": "2026-11-27",
    "machine": "2 cores",
    "values": {"a": 1.5},
}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"id": "other"}, "field 'id' is 'other', the file says 'r'"),
        ({"command": ""}, "field 'command' must be a non-empty str"),
        ({"date": "27.11.2026"}, "field 'date' is '27.11.2026', not YYYY-MM-DD"),
        ({"commit": "HEAD"}, "field 'commit' is 'HEAD', not a commit hash"),
        ({"values": {"a": "0.9"}}, "values.a is '0.9', not a number"),
        ({"models": {"b": {"config": "configs/x.toml"}}}, "models.b counts a value the record"),
        ({"models": {"a": {"spec": {}}}}, "models.a needs a 'config' path"),
    ],
)
def test_a_malformed_record_is_refused_naming_file_and_field(
    tmp_path: Path, change: dict[str, object], message: str
) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps({**GOOD, **change}), encoding="utf-8")
    with pytest.raises(RecordError, match=r"r\.json: ") as caught:
        read_record(path)
    assert message in str(caught.value)


def test_a_record_that_is_not_json_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text('{\n  "id": "r",\n  oops\n}\n', encoding="utf-8")
    with pytest.raises(RecordError, match=r"r.json:3: not JSON"):
        read_record(path)


def test_the_records_folder_holds_only_records() -> None:
    assert all(path.suffix == ".json" for path in RECORDS.iterdir())


def test_the_count_says_how_many_numbers_are_backed(capsys: pytest.CaptureFixture[str]) -> None:
    cited, total, quoted = count_numbers(documents())
    assert 0 < cited <= total and quoted > 0
    assert main(["count"]) == 0
    said = capsys.readouterr().out
    assert said == (
        f"{cited} of {total} documented numbers are backed by a record, "
        f"and {quoted} numbers of quoted output\n"
    )


def test_sections_split_a_pages_unbacked_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "1.5 before\n# A\n0.25 and 0.5 <!-- record: r k -->\n```text\n# not a heading 9.5\n```\n"
        "## B\n1.25, 2.5 and 1,000\n",
        encoding="utf-8",
    )
    found = [(where.split(":", 1)[1], count) for where, count in unbacked_sections(page)]
    assert found == [("1 (no heading)", 1), ("2 # A", 1), ("7 ## B", 3)]
    assert sum(count for _, count in found) == unbacked([page])[str(page)]
    assert main(["count", "--sections", str(page)]) == 0
    assert capsys.readouterr().out.splitlines()[0].split() == ["3", f"{page}:7", "##", "B"]
    assert main(["count", "--sections", str(tmp_path / "none.md")]) == 2
    assert "--sections" in capsys.readouterr().err


UNBACKED = ROOT / "tests/docs/unbacked.json"


def test_no_page_gains_an_unbacked_number() -> None:
    """Each page's count of numbers that cite no record may only fall: a new number is
    measured by `records.py record ID -- COMMAND` and cited, never typed."""
    allowed = json.loads(UNBACKED.read_text(encoding="utf-8"))
    now = unbacked(documents())
    grown = [
        f"{page}: {count} numbers cite no record (at most {allowed.get(page, 0)}); record them "
        "with tests/docs/records.py record ID -- COMMAND and cite them"
        for page, count in now.items()
        if count > allowed.get(page, 0)
    ]
    fallen = [
        f"{page}: {count} unbacked numbers, {UNBACKED.name} allows {allowed[page]}: lower it"
        for page, count in now.items()
        if count < allowed.get(page, 0)
    ]
    gone = [f"{page}: in {UNBACKED.name} but not a document" for page in allowed if page not in now]
    assert not grown + fallen + gone, "\n".join(grown + fallen + gone)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A git checkout with one commit, its src/ clean."""
    root = tmp_path / "checkout"
    (root / "src").mkdir(parents=True)
    (root / "src/a.py").write_text("a = 1\n", encoding="utf-8")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(root)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    return root


def test_a_record_is_written_by_the_command_that_measured_it(checkout: Path) -> None:
    script = "import json; print('epoch 1'); print(json.dumps({'test': {'acc': 0.93}, 'n': 5}))"
    path = record("probe", [sys.executable, "-c", script], root=checkout, folder=checkout)
    written = read_record(path)
    assert written.values == {"test.acc": 0.93, "n": 5.0}
    assert written.command.startswith(sys.executable) and COMMIT.fullmatch(written.commit)
    assert not list(checkout.glob("*.partial"))


def test_the_command_line_records_what_follows_the_dashes(
    checkout: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("tests.docs.records.ROOT", checkout)
    monkeypatch.setattr("tests.docs.records.RECORDS", checkout)
    script = 'print(\'{"a": 1, "b": 2}\')'
    assert (
        main(["record", "probe", "--keys", "b", "--note", "n", "--", sys.executable, "-c", script])
        == 0
    )
    assert read_record(checkout / "probe.json").values == {"b": 2.0}
    assert main(["record", "gone", "--", "/no/such/program"]) == 2
    assert (
        capsys.readouterr().err
        == "records.py record: cannot run /no/such/program: No such file or directory\n"
    )


def test_a_record_reads_the_file_the_command_wrote(checkout: Path) -> None:
    script = "import json; open('out.json', 'w').write(json.dumps({'m': {'acc': 0.5}}))"
    command = [sys.executable, "-c", script]
    path = record("probe", command, root=checkout, folder=checkout, source=Path("out.json"))
    assert read_record(path).values == {"m.acc": 0.5}
    os.utime(checkout / "out.json", (0, 0))  # an old file: not this run's
    with pytest.raises(RecordingError, match=r"the command did not write out\.json"):
        record(
            "old",
            [sys.executable, "-c", "1"],
            root=checkout,
            folder=checkout,
            source=Path("out.json"),
        )


def test_a_record_refuses_uncommitted_code(checkout: Path) -> None:
    (checkout / "src/a.py").write_text("a = 2\n", encoding="utf-8")
    with pytest.raises(RecordingError, match=r"commit first: .*src/a\.py"):
        record("probe", [sys.executable, "-c", "print('{}')"], root=checkout, folder=checkout)
    assert not list(checkout.glob("*.json"))


@pytest.mark.parametrize(
    ("script", "keys", "message"),
    [
        ("raise SystemExit(3)", None, "exited with 3"),
        (None, None, "cannot run /no/such/program"),
        ("print('accuracy 0.9')", None, "printed no JSON object"),
        ('print(\'{"a": "x"}\')', None, "holds no finite number"),
        ("print('{\"a\": 1}')", ["b"], "the output has no b"),
    ],
)
def test_nothing_is_recorded_from_a_failed_or_numberless_run(
    checkout: Path, script: str | None, keys: list[str] | None, message: str
) -> None:
    command = ["/no/such/program"] if script is None else [sys.executable, "-c", script]
    with pytest.raises(RecordingError, match=message):
        record("probe", command, root=checkout, folder=checkout, keys=keys)
    assert not list(checkout.glob("*.json"))


FILES = [("dataset", "train"), ("dev", "dev"), ("test", "test")]


def test_splits_says_the_sizes_of_a_configs_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "train.txt").write_text("the/DT cat/NN sat/VB\na/DT dog/NN\n", encoding="utf-8")
    (tmp_path / "dev.txt").write_text("a/DT cat/NN\n", encoding="utf-8")
    (tmp_path / "test.txt").write_text("the/DT dog/NN ran/VB ran/VB\n", encoding="utf-8")
    overrides = [f'data.{s}="{tmp_path / f"{n}.txt"}"' for s, n in FILES]
    sizes = split_sizes("configs/pos_wsj.toml", overrides)
    assert sizes["train"] == {"examples": 2, "positions": 5, "majority": 0.4}
    assert sizes["dev"] == {"examples": 1, "positions": 2, "majority": 0.5}
    assert sizes["test"] == {"examples": 1, "positions": 4, "majority": 0.5}
    assert sizes["spec"]["num_labels"] == 3 and sizes["spec"]["max_len"] == 128
    assert main(["splits", "configs/pos_wsj.toml", *[f"--set={o}" for o in overrides]]) == 0
    assert json.loads(capsys.readouterr().out) == sizes
