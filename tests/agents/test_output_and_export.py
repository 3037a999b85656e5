import json
from pathlib import Path

import pytest

from stitch_lsp.agents.trajectory import SCHEMA
from stitch_lsp.candidate_files import free_name, header_line, with_header, write_new
from stitch_lsp.cli.main import main


def test_free_names_never_collide(tmp_path):
    ref = tmp_path / "m.py"
    ref.write_text("x")
    assert free_name(ref).name == "m_stitch.py"
    (tmp_path / "m_stitch.py").write_text("mine")
    assert free_name(ref).name == "m_stitch_2.py"
    assert free_name(ref, taken={"m_stitch_2.py"}).name == "m_stitch_3.py"
    with pytest.raises(FileExistsError):
        write_new(tmp_path / "m_stitch.py", "theirs")
    assert (tmp_path / "m_stitch.py").read_text() == "mine"


def test_header_is_relative_and_replaces_a_written_one(tmp_path):
    ref = tmp_path / "problems" / "p.py"
    out = tmp_path / "out" / "p_stitch.py"
    assert header_line(ref, out) == "# stitch-lsp: reference=../problems/p.py"
    text = with_header("# stitch-lsp: reference=wrong.py\nimport torch\n", ref, out)
    assert text == "# stitch-lsp: reference=../problems/p.py\nimport torch\n"


def _rec(i: int, reward, correct) -> dict:
    return {
        "schema": SCHEMA,
        "run_id": "r",
        "attempt": i,
        "stage": "draft",
        "messages": [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}],
        "reward": reward,
        "correct": correct,
    }


def test_export_filters_and_refuses_to_overwrite(tmp_path: Path, capsys):
    folder = tmp_path / "traj"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.jsonl").write_text(
        "\n".join(
            json.dumps(_rec(i, r, c))
            for i, r, c in [(1, 0.0, False), (2, 1.4, True), (3, None, None)]
        )
        + "\n"
    )
    (folder / "sub" / "b.jsonl").write_text(
        json.dumps(_rec(4, 2.5, True)) + "\nnot json\n" + json.dumps({"schema": "other"}) + "\n"
    )
    out = tmp_path / "all.jsonl"
    assert main(["export-trajectories", str(folder), "-o", str(out)]) == 0
    assert [json.loads(x)["attempt"] for x in out.read_text().splitlines()] == [1, 2, 3, 4]
    assert main(["export-trajectories", str(folder), "-o", str(out)]) == 2
    assert "exists" in capsys.readouterr().err

    assert main(["export-trajectories", str(folder), "--min-reward", "1.0"]) == 0
    got = [json.loads(x)["attempt"] for x in capsys.readouterr().out.splitlines()]
    assert got == [2, 4]
    assert main(["export-trajectories", str(folder), "--only-correct"]) == 0
    assert [json.loads(x)["attempt"] for x in capsys.readouterr().out.splitlines()] == [2, 4]
    assert main(["export-trajectories", str(tmp_path / "missing")]) == 2
