"""eagle3-doctor template-diff: the same conversations rendered the training way and the serving way."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ...core.findings import exit_code
from ..formats import check_format, drop_ignored, emit, report_to_stderr
from ..options import (
    FORMAT,
    JSON_OUT,
    LIMIT,
    PROMPTS,
    SERVE_TEMPLATE,
    SERVE_TEMPLATE_KWARGS,
    TARGET,
    TEMPLATE_REQUESTS,
    TRAIN_ADD_SPECIAL_TOKENS,
    TRAIN_DATA,
    TRAIN_SYSTEM_PROMPT,
    TRAIN_TEMPLATE,
    TRAIN_TEMPLATE_KWARGS,
    TRAIN_TOKENIZER,
    WRITE_TEMPLATE,
    options,
)
from ..output import console, write_result


@options(
    target=TARGET,
    train_template=TRAIN_TEMPLATE,
    serve_template=SERVE_TEMPLATE,
    train_system_prompt=TRAIN_SYSTEM_PROMPT,
    train_add_special_tokens=TRAIN_ADD_SPECIAL_TOKENS,
    train_template_kwargs=TRAIN_TEMPLATE_KWARGS,
    serve_template_kwargs=SERVE_TEMPLATE_KWARGS,
    train_data=TRAIN_DATA,
    requests=TEMPLATE_REQUESTS,
    prompts=PROMPTS,
    limit=LIMIT,
    train_tokenizer=TRAIN_TOKENIZER,
    write_template=WRITE_TEMPLATE,
    json_out=JSON_OUT,
    format=FORMAT,
)
def template_diff_cmd(**given: Any) -> int:
    """Render the same conversations the training way and the serving way; report the first differing tokens."""
    from ..validate import preflight_no_model

    a = SimpleNamespace(**given)
    check_format(a.format, a.json_out)
    preflight_no_model(**given)
    from ...analyses.templates.template_diff import parse_kwargs, template_diff
    from ...report.templates import render_template_diff

    res = template_diff(
        a.target,
        train_template=a.train_template,
        serve_template=a.serve_template,
        train_system_prompt=a.train_system_prompt,
        train_add_special_tokens=a.train_add_special_tokens,
        train_kwargs=parse_kwargs(a.train_template_kwargs, "--train-template-kwargs"),
        serve_kwargs=parse_kwargs(a.serve_template_kwargs, "--serve-template-kwargs"),
        train_data=a.train_data,
        requests=a.requests,
        prompts=a.prompts,
        limit=a.limit,
        train_tokenizer=a.train_tokenizer,
    )
    if a.write_template:
        from ...io.outputs import write_output

        write_output(a.write_template, res.train.text.encode("utf-8"))
        for f in res.findings:
            if f.fix and "write the training template to a file" in f.fix:
                from ...analyses.templates.diff import written_template_fix

                f.fix = written_template_fix(a.write_template)
                f.location = f.fix.location
    res.findings[:] = drop_ignored(res.findings)
    render_template_diff(console(stderr=report_to_stderr(a.format, a.json_out)), res)
    write_result(a.json_out, res.to_dict, False)
    emit(a.format, res.findings)
    return exit_code(res.findings, "warning")
