"""The "works with" table of docs/works-with.md is rendered from JUnit reports of the family tests."""

import pytest

from scripts import works_with


def junit(version, cases):
    body = "".join(
        f'<testcase classname="tests.test_families" name="{name}[{family}]">{outcome}</testcase>'
        for name, family, outcome in cases
    )
    return (f'<testsuites><testsuite name="pytest"><properties><property name="comfyui_version" value="{version}"/>'
            f"</properties>{body}</testsuite></testsuites>")


def write_report(tmp_path, version, outcome_by_family):
    cases = [(test, family, outcome) for family, outcome in outcome_by_family.items() for test in works_with.CHECKS]
    path = tmp_path / f"{version}.xml"
    path.write_text(junit(version, cases))
    return path


def test_table_has_a_column_per_version_and_a_cell_per_outcome(tmp_path):
    skip = '<skipped message="no such model"/>'
    old = write_report(tmp_path, "0.3.75", {"wan": "", "kandinsky": skip})
    new = write_report(tmp_path, "0.33.0", {"wan": "", "kandinsky": ""})
    new.write_text(new.read_text().replace(
        'name="test_cache_skips[kandinsky]">', 'name="test_cache_skips[kandinsky]"><failure message="x"/>'))
    table = works_with.render_table([works_with.read_report(new), works_with.read_report(old)],
                                    {"wan": "Wan", "kandinsky": "Kandinsky"})
    assert table.splitlines() == [
        "| Family | ComfyUI 0.3.75 | ComfyUI 0.33.0 |",
        "|---|---|---|",
        "| Kandinsky | not in this version | fails: skips |",
        "| Wan | yes | yes |",
    ]


def test_file_formats_give_one_row_per_family_and_format(tmp_path):
    report = works_with.read_report(write_report(tmp_path, "0.33.0", {"wan": "", "wan_fp8": ""}))
    table = works_with.render_table([report], {"wan": "Wan", "wan_fp8": "Wan"},
                                    {"wan": "fp16 / bf16", "wan_fp8": "fp8-scaled"})
    assert table.splitlines() == [
        "| Family | File | ComfyUI 0.33.0 |",
        "|---|---|---|",
        "| Wan | fp16 / bf16 | yes |",
        "| Wan | fp8-scaled | yes |",
    ]


def test_table_block_is_replaced_between_its_markers():
    text = f"intro\n{works_with.START_MARKER}\nold table\n{works_with.END_MARKER}\nrest\n"
    assert works_with.replace_block(text, "new") == f"intro\n{works_with.START_MARKER}\nnew\n{works_with.END_MARKER}\nrest\n"
    with pytest.raises(ValueError, match="works-with:start"):
        works_with.replace_block("no markers", "new")


def test_report_without_a_version_is_refused(tmp_path):
    path = tmp_path / "bare.xml"
    path.write_text("<testsuites><testsuite/></testsuites>")
    with pytest.raises(ValueError, match="comfyui_version"):
        works_with.read_report(path)


def test_labels_come_from_the_family_tests():
    labels = works_with.family_labels()
    assert labels["wan21_t2v"] == "Wan 2.1 T2V" and labels["hunyuan15_t2v"] == "HunyuanVideo 1.5 T2V"
    formats = works_with.family_file_formats()
    assert formats["wan21_t2v"] == "fp16 / bf16" and formats["wan21_t2v_fp8"] == "fp8-scaled"
    assert formats["wan22_a14b_t2v_high_fp8"] == formats["hunyuan15_t2v_fp8"] == "fp8-scaled"
    assert labels["ltx2"] == "LTX-2.3 (video + audio)"  # LTX-2's row comes from its own test module


def test_the_docs_page_holds_the_generated_table():
    page = works_with.PAGE.read_text()
    table = page.split(works_with.START_MARKER, 1)[1].split(works_with.END_MARKER, 1)[0]
    assert table.strip().startswith("| Family | File | ComfyUI 0.3.75 | ComfyUI 0.33.0 |")
    assert works_with.replace_block(page, table.strip()) == page  # rewriting the same table leaves the page as it is
