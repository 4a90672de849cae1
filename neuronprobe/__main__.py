"""``python -m neuronprobe``: the command line (what the notebook magic runs in a child process).

Started by the magic, the command dies with the kernel that started it: the magic names
its pid in ``NEURONPROBE_PARENT_PID`` and the command arms ``PR_SET_PDEATHSIG`` before
anything else (a kernel killed or restarted mid-analysis leaves nothing running).
"""

from neuronprobe.process.lifeline import PARENT_PID_ENV, die_with_parent, parent_from_env

_parent = parent_from_env()
if _parent is not None:
    import os

    os.environ.pop(PARENT_PID_ENV, None)  # for this process only: its own workers name their parent themselves
    die_with_parent(_parent)

from neuronprobe.cli import main  # noqa: E402 - after the lifeline is armed

main()
