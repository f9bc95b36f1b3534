"""Fixes to the book's HTML, loaded by `_config.yml` (`sphinx.local_extensions`).

Sphinx 7.4 (the series Jupyter Book 1 pins) writes an inline script that an extension registers
after the builder started twice: once as registered (file name None) and once more from
`prepare_writing` (file name ""), which do not compare equal. sphinx-thebe registers
`const THEBE_JS_URL = ...` that way, so every page declared it twice and the browser reported
"Uncaught SyntaxError: Identifier 'THEBE_JS_URL' has already been declared" on every page
(tests/test_browser.py). This drops the repeated copy of any script from each page.
"""


def _script_key(script):
    attributes = getattr(script, "attributes", {}) or {}
    return (
        getattr(script, "filename", script) or "",
        getattr(script, "priority", None),
        tuple(sorted((str(name), str(value)) for name, value in attributes.items())),
    )


def drop_repeated_scripts(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if not scripts:
        return
    seen = set()
    unique = []
    for script in scripts:
        key = _script_key(script)
        if key not in seen:
            seen.add(key)
            unique.append(script)
    scripts[:] = unique  # the builder restores its own list after each page


def setup(app):
    # Late priority: after the themes and extensions that add scripts to the page context.
    app.connect("html-page-context", drop_repeated_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
