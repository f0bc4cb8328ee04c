"""The tiny study (issue 13): every finding grid run in order, one published summary per finished run.

``star study --scale tiny`` reads ``configs/study/study.yaml`` (:class:`StudyConfig`): the grids to run (one
YAML per finding under ``configs/study/``), the seeds, the per-grid time budget and the stage timings the
estimate uses. It runs every grid's runs through the experiment runner (:func:`run_study`), writes each
finished run's summary to ``reports/tiny-study/<finding>/<run>.parquet`` (:func:`write_summary`, no
weights), optionally commits that one file (``--commit``), and finally runs ``star report``.

Modules, in the order a study uses them: :mod:`.config` (the study file and its grids), :mod:`.estimates`
(stage timings, content signatures, the dry run), :mod:`.publish` (summaries, published hashes, commits),
:mod:`.run` (running, the lock, runs at once) and :mod:`.verify` (reruns against published summaries).
"""

from star_lib.experiments.study.config import (
    MIN_SEEDS,
    STUDY_DIR,
    STUDY_FILE,
    MoreSeeds,
    StudyConfig,
    StudyError,
    read_study,
)
from star_lib.experiments.study.estimates import (
    GridEstimate,
    RunEstimate,
    Timing,
    describe_estimates,
    estimate,
    stage_signatures,
)
from star_lib.experiments.study.publish import (
    HELD_OUT_PREFIXES,
    PROJECT_ROOT,
    PUBLISHED_DIR,
    SUMMARY_COLUMNS,
    check_committable,
    commit_file,
    git_root,
    publication_status,
    published_hash,
    published_runs,
    run_summary,
    shared_summary,
    summary_path,
    write_summary,
)
from star_lib.experiments.study.run import LOCK_FILE, StudyRun, check_jobs, matching, run_study, study_lock
from star_lib.experiments.study.verify import (
    REPRODUCED_PREFIXES,
    Reproduction,
    reproduction_gaps,
    verify_study,
)

__all__ = [
    "HELD_OUT_PREFIXES",
    "LOCK_FILE",
    "MIN_SEEDS",
    "PROJECT_ROOT",
    "PUBLISHED_DIR",
    "REPRODUCED_PREFIXES",
    "STUDY_DIR",
    "STUDY_FILE",
    "SUMMARY_COLUMNS",
    "GridEstimate",
    "MoreSeeds",
    "Reproduction",
    "RunEstimate",
    "StudyConfig",
    "StudyError",
    "StudyRun",
    "Timing",
    "check_committable",
    "check_jobs",
    "commit_file",
    "describe_estimates",
    "estimate",
    "git_root",
    "matching",
    "publication_status",
    "published_hash",
    "published_runs",
    "read_study",
    "reproduction_gaps",
    "run_study",
    "run_summary",
    "shared_summary",
    "stage_signatures",
    "study_lock",
    "summary_path",
    "verify_study",
    "write_summary",
]
