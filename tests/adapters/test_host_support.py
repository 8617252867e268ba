"""The adapters' one shape of supported versions, one check of them, and one lazy import of a host."""

from __future__ import annotations

import json
import sys
import types
from importlib import metadata
from typing import Any

import pytest

from group_admission.adapters._kit import _hosts as _host_support
from group_admission.adapters._kit import (
    check_versions,
    find_host,
    host_versions,
    import_host,
    publish,
)


class FakeDistribution:
    def __init__(self, version: str, direct_url: dict[str, Any] | None = None) -> None:
        self.version = version
        self._direct_url = direct_url

    def read_text(self, name: str) -> str | None:
        return json.dumps(self._direct_url) if name == "direct_url.json" and self._direct_url else None


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> dict[str, FakeDistribution]:
    """The distributions check_versions sees (and a fresh once-per-adapter memory)."""
    found: dict[str, FakeDistribution] = {}

    def distribution(name: str) -> FakeDistribution:
        if name not in found:
            raise metadata.PackageNotFoundError(name)
        return found[name]

    monkeypatch.setattr(_host_support.metadata, "distribution", distribution)
    monkeypatch.setattr(_host_support, "_checked", set())
    return found


def from_git(commit: str) -> dict[str, Any]:
    return {"url": "https://github.com/o/r", "vcs_info": {"vcs": "git", "commit_id": commit}}


class TestShape:
    def test_specifiers_and_commit_pins_make_a_read_only_mapping(self) -> None:
        versions = host_versions({"trl": ">=1.16,<1.17", "ragen": "o/RAGEN@20daedc"})

        assert {"trl": ">=1.16,<1.17", "ragen": "o/RAGEN@20daedc"} == versions
        with pytest.raises(TypeError):
            versions["trl"] = ">=2"  # type: ignore[index]

    @pytest.mark.parametrize("bad", ["1.16", "o/r#288", "o/r@main", "", 1.16, None])
    def test_anything_else_is_refused_by_name(self, bad: Any) -> None:
        with pytest.raises(ValueError, match=r"the supported versions of 'host' must be a PEP 440 specifier"):
            host_versions({"host": bad})


class TestCheck:
    def test_an_installed_version_outside_the_range_warns_once_per_adapter(
        self, installed: dict[str, FakeDistribution]
    ) -> None:
        installed["trl"] = FakeDistribution("1.17.0")
        versions = host_versions({"trl": ">=1.16,<1.17"})

        with pytest.warns(RuntimeWarning, match=r"^adapter-a supports trl >=1.16,<1.17 \(got trl==1.17.0\)"):
            check_versions("adapter-a", versions)
        check_versions("adapter-a", versions)  # the second check is silent

    @pytest.mark.parametrize("version", ["1.16.0", "1.16.9", "1.16.1rc1"])
    def test_a_version_inside_the_range_passes(
        self, installed: dict[str, FakeDistribution], version: str
    ) -> None:
        installed["trl"] = FakeDistribution(version)

        check_versions("adapter-b", host_versions({"trl": ">=1.16,<1.17"}))

    def test_a_host_that_is_not_installed_passes(self, installed: dict[str, FakeDistribution]) -> None:
        check_versions("adapter-c", host_versions({"verl": ">=0.9.1,<0.10"}))

    def test_every_distribution_outside_its_range_is_named(
        self, installed: dict[str, FakeDistribution]
    ) -> None:
        installed["verl"], installed["TransferQueue"] = FakeDistribution("0.10.0"), FakeDistribution("0.1.9")

        with pytest.warns(RuntimeWarning, match=r"\(got verl==0\.10\.0, TransferQueue==0\.1\.9\)"):
            check_versions("adapter-d", host_versions({"verl": ">=0.9.1,<0.10", "TransferQueue": ">=0.1.10"}))

    def test_a_git_install_at_another_commit_warns(self, installed: dict[str, FakeDistribution]) -> None:
        installed["ragen"] = FakeDistribution("0.1", from_git("0123456789abcdef0123456789abcdef01234567"))

        with pytest.warns(RuntimeWarning, match=r"\(got ragen from commit 0123456789ab\)"):
            check_versions("adapter-e", host_versions({"ragen": "o/RAGEN@20daedc"}))

    @pytest.mark.parametrize(
        "direct_url",
        [
            from_git("20daedc47558e000f7de912b060646bf2e8026bd"),
            {"url": "file:///x", "dir_info": {"editable": True}},
            None,
        ],
        ids=["the same commit", "an editable clone", "no record"],
    )
    def test_a_matching_or_unknown_commit_passes(
        self, installed: dict[str, FakeDistribution], direct_url: dict[str, Any] | None
    ) -> None:
        installed["ragen"] = FakeDistribution("0.1", direct_url)

        check_versions("adapter-f", host_versions({"ragen": "o/RAGEN@20daedc"}))


class TestImport:
    def test_a_missing_host_names_the_adapter_the_host_and_the_install_line(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setitem(sys.modules, "some_host", None)

        with pytest.raises(ImportError) as info:
            import_host(
                "some_host.sub", adapter="adapter-g", needs="SomeHost", install="pip install x", versions={}
            )

        assert str(info.value).startswith("adapter-g requires SomeHost (")
        assert str(info.value).endswith("); install it with: pip install x")
        assert "some_host" in str(info.value.name)

    def test_an_importable_host_is_returned_and_its_versions_checked(
        self, installed: dict[str, FakeDistribution]
    ) -> None:
        installed["json"] = FakeDistribution("2.0")
        versions = host_versions({"json": "<2"})

        with pytest.warns(RuntimeWarning, match=r"got json==2\.0"):
            module = import_host("json", adapter="adapter-h", needs="json", install="-", versions=versions)

        assert module is json

    def test_find_host_gives_none_for_a_host_that_is_absent(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setitem(sys.modules, "some_host", None)

        assert find_host("some_host", adapter="adapter-i", versions={}) is None
        assert find_host("json", adapter="adapter-i", versions={}) is json


def test_publish_gives_private_names_the_package_and_leaves_public_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    package = types.ModuleType("group_admission.adapters.fake")

    def private() -> None: ...

    class Public: ...

    private.__module__, Public.__module__ = "group_admission.adapters.fake._impl", "group_admission"
    package.private, package.Public, package.CONSTANT = private, Public, host_versions({"x": ">=1"})  # type: ignore[attr-defined]
    package.__all__ = ["CONSTANT", "Public", "private"]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, package.__name__, package)

    publish(package.__name__)

    assert ("group_admission.adapters.fake", "group_admission") == (private.__module__, Public.__module__)
