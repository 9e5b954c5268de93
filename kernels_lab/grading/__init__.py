"""Student exercise grading.

  exercises     declarative exercises (views of registered workloads), and instructors' exercise files
  cases         the runs a child makes: cases x launch configurations x schedules, fresh inputs, hidden seeds
  confine       what a child may touch (warden.py applies it: PID namespace or subreaper, Landlock, an
                unprivileged user, no network, rlimits); protections() says what is in force here
  lifecycle     one confined child: start it through the warden, a clock per phase, kill its process tree,
                collect its report and say how it ended (run_child; run_confined for any command)
  child         what runs in the child: the submission's runs, who wrote each output element
  records       typed records: a ChildRun, a Run (what the child reported), its Verdict, a check's
                TestResult; the report's strict JSON codec
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
  api           what the judges of data exercises (in kernels_lab/topics) may use of the grader: nothing else
"""
