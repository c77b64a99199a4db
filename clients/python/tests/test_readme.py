"""The README's start-and-wait snippet runs as written against a real server."""

from __future__ import annotations

import re
from pathlib import Path


def test_the_readme_snippet_starts_a_thread_and_prints_its_answer(server, monkeypatch, capsys):
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    snippets = re.findall(r"```python\n(.*?)```", readme, re.S)
    assert len(snippets) == 1
    monkeypatch.setenv("CAIRN_URL", server.url)
    monkeypatch.setenv("CAIRN_TOKEN", server.token)
    exec(compile(snippets[0], "README.md", "exec"), {})
    thread, status, answer = capsys.readouterr().out.strip().split(" ", 2)
    assert status == "completed" and thread and answer
