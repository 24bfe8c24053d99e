"""Config files: storage.path relative to the file, upstream.base_url validated, YAML errors that
name the file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ctxwarden.proxy.config import ConfigError, load_settings


def test_a_relative_storage_path_in_a_file_is_relative_to_the_file(tmp_path, monkeypatch):
    conf_dir = tmp_path / "etc"
    conf_dir.mkdir()
    config = conf_dir / "ctxwarden.yaml"
    config.write_text("storage:\n  path: data/store\n")
    elsewhere = tmp_path / "somewhere" / "else"
    elsewhere.mkdir(parents=True)
    monkeypatch.chdir(elsewhere)
    assert Path(load_settings(config).storage.path) == conf_dir / "data" / "store"
    monkeypatch.chdir(tmp_path)
    assert Path(load_settings(Path("etc/ctxwarden.yaml")).storage.path) == conf_dir / "data" / "store"


def test_absolute_and_home_storage_paths_stay_and_the_default_follows_the_working_directory(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(f"storage:\n  path: {tmp_path / 'abs'}\n")
    assert load_settings(config).storage.path == str(tmp_path / "abs")
    config.write_text("storage:\n  path: ~/ctxw-store\n")
    assert load_settings(config).storage.path == str(Path.home() / "ctxw-store")
    config.write_text("budget:\n  warn: 0.6\n")  # no storage in the file: the default, as before
    assert load_settings(config).storage.path == ".ctxwarden"
    assert load_settings(None, {"storage": {"path": "rel"}}).storage.path == "rel"  # overrides: as given


@pytest.mark.parametrize("url", ["api.openai.com/v1", "ftp://example.com/v1", "http://", "not a url", "localhost:8000"])
def test_upstream_base_url_must_be_an_http_url_with_a_host(tmp_path, url):
    config = tmp_path / "c.yaml"
    config.write_text(f"upstream:\n  base_url: '{url}'\n")
    with pytest.raises(ConfigError) as err:
        load_settings(config)
    assert "upstream.base_url" in str(err.value) and str(config) in str(err.value)
    checked = subprocess.run([sys.executable, "-m", "ctxwarden.proxy.cli", "check-config", str(config)],
                             capture_output=True, text=True)
    assert checked.returncode != 0 and "upstream.base_url" in checked.stderr


@pytest.mark.parametrize("url", ["https://api.openai.com/v1", "http://127.0.0.1:8000/v1", "http://vllm:8000/v1"])
def test_http_base_urls_pass(tmp_path, url):
    config = tmp_path / "c.yaml"
    config.write_text(f"upstream:\n  base_url: {url}\n")
    assert load_settings(config).upstream.base_url == url


def test_yaml_errors_name_the_file_not_a_unicode_string(tmp_path):
    config = tmp_path / "broken.yaml"
    config.write_text("server:\n  port: [8787\n")
    with pytest.raises(ConfigError) as err:
        load_settings(config)
    assert "<unicode string>" not in str(err.value)
    assert f'in "{config}", line' in str(err.value)
