"""Student exercise grading.

  exercises     declarative exercises (views of registered workloads), and instructors' exercise files
  sandbox       one confined child per submission (warden.py: PID namespace or subreaper, Landlock,
                an unprivileged user, no network, limits per run); protections() says what is in force
  child         what runs in the child: the submission's runs, who wrote each output element
  records       typed records: a Run (what the child reported), its Verdict, a check's TestResult
  verdict       the verdict on one run, hints and budgets
  judge         the checks as objects (id, needs, scoring, words), validated when an exercise is built;
                one judge for the grader and kernels_lab.lessons.check; which count here (counted_checks)
  grade         one submission: its children (runs, sanitizers, the simulator's rerun) -> the judge -> a Grade
  compile_gate  numba's real compiler for the course's GPUs, no GPU needed; available() is the probe doctor shows
  sanitizer     compute-sanitizer memcheck (every case, each error tied to its run) and racecheck (GPU)
  speed         the student's kernel against the reference, interleaved (GPU)
  batch         many submissions: shards, resumable runs (content hashes), merge, a CSV gradebook
  bundle        a Gradescope autograder zip (setup.sh, run_autograder; graded on the simulator)
  report        text, JSON and Gradescope's results.json, written atomically
"""
