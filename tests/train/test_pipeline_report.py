from rich.console import Console

from star_lib.train.pipeline import PipelineResult, print_report


def test_pipeline_report_prints_the_table_curve_monitor_and_stage_times():
    models = {
        name: {"n": 4.0, "final_pass": fp, "cs_micro": 0.5, "sum": s, "sum_se": 0.01, "valid_tool_calls": 1.0,
               "parseable_plans": 1.0, "format_error_rate": 0.0, "model_tokens": 90.0}
        for name, fp, s in (("base", 0.0, 0.0), ("sft", 0.25, 0.3), ("rl", 0.5, 0.6))
    }
    result = PipelineResult(
        models=models, rl_curve=[(1, 0.1), (2, 0.2)], paired={"mean": 0.3, "se": 0.02},
        rl_monitor=[(0, 0.3, 0.25), (2, 0.6, 0.5)],
        stages={"sft": {"seconds": 12.5, "steps": 3}, "rl": {"seconds": 7.0}, "rl_monitor_queries": 4},
    )
    console = Console(record=True, width=200)
    print_report(result, console=console)
    text = console.export_text()
    assert "50.0 %" in text and "0.600 ± 0.010" in text
    assert "+0.300 ± 0.020" in text
    assert "on 4 held-out queries during GRPO" in text
    assert "stage seconds: sft 12.5, rl 7.0" in text
