"""Student exercise grading: declarative exercises, a sandboxed child per submission, verdicts
computed in the parent, and reports (text, JSON, Gradescope results.json)."""
