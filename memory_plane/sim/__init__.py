"""The simulated phone, the scripted agent, and the demo and replay benchmark built on them."""

from ._agent import TOOLS, ScriptedAgent, Task, TaskRun, no_memory_steps, tasks_for
from ._demo import DEFAULT_DEMO_ROOT, Round, replay_metrics, run_demo, run_rounds
from ._world import Element, Result, SimPhone

__all__ = ["DEFAULT_DEMO_ROOT", "TOOLS", "Element", "Result", "Round", "ScriptedAgent", "SimPhone", "Task", "TaskRun",
           "no_memory_steps", "replay_metrics", "run_demo", "run_rounds", "tasks_for"]
