"""The README's quick start for users' own QA data has its four steps (pipeline, fine-tune,
predict, evaluate).  Running them as written on the shipped sample, with every count checked,
is ``tests/test_readme_quickstarts.py::test_the_quick_start_runs_as_written[### Your own QA
data (JSON lines)]`` (it needs no ../shared/samples).
"""

import re


from tests import REPO_ROOT

SECTION = "### Your own QA data (JSON lines)"


def readme_commands():
  """The commands of the section's first ``bash`` block, continuation lines joined."""
  text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
  section = text[text.index(SECTION):]
  block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
  return [line for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def test_the_section_has_the_four_steps():
  cmds = readme_commands()
  assert cmds[0].startswith("DATA=")
  assert [c.split()[2] for c in cmds[1:]] == [
      "pipelines", "model.finetune", "model.predict", "model.evaluate"]
