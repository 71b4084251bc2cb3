"""Evaluation: a policy against the heuristic on a corpus -- per-module CSV,
per-call-site report, summary table, plots, and verification through stock
clang-19 with the plugin."""

from .evaluate import Evaluation, call_site_report, evaluate
from .plots import plot_evaluation, plot_training_curve
from .report import ModuleResult, format_summary, summarize, write_csv
from .verify import clang_command, clang_text_sizes, text_size, verify_with_clang

__all__ = ["Evaluation", "ModuleResult", "call_site_report", "clang_command", "clang_text_sizes", "evaluate",
           "format_summary", "plot_evaluation", "plot_training_curve", "summarize", "text_size", "verify_with_clang",
           "write_csv"]
