"""Where the session finds Spark's Kafka connector, and what it says when a jar is missing."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pyspark
import pytest
from pyspark.sql import SparkSession

from pricing_ha.config import BrokerConfig
from pricing_ha.config._msk_iam import SIGNER_MODULE
from pricing_ha.errors import SparkConnectorError
from pricing_ha.pipeline.kafka_reader import read_topics
from pricing_ha.pipeline.session import SPARK_KAFKA_JARS_ENV, spark_kafka_jars

pytestmark = pytest.mark.spark

CONNECTOR = f"spark-sql-kafka-0-10_2.13-{pyspark.__version__}.jar"


def jar_dir(path: Path, *names: str) -> Path:
    """A directory holding empty files named ``names``."""
    path.mkdir()
    for name in names:
        (path / name).touch()
    return path


def test_the_jars_come_from_the_directory_the_environment_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every jar of $PRICING_HA_SPARK_KAFKA_JARS is handed to Spark, the connector's among them."""
    libs = jar_dir(tmp_path / "libs", CONNECTOR, "kafka-clients-3.9.2.jar", "notes.txt")
    monkeypatch.setenv(SPARK_KAFKA_JARS_ENV, str(libs))
    assert spark_kafka_jars() == [libs / "kafka-clients-3.9.2.jar", libs / CONNECTOR]


def test_a_missing_connector_is_one_line_naming_the_directory_and_scripts_jars(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No connector jar: the error names the directory searched and how to fill it."""
    libs = jar_dir(tmp_path / "empty", "kafka-clients-3.9.2.jar")
    monkeypatch.setenv(SPARK_KAFKA_JARS_ENV, str(libs))
    with pytest.raises(SparkConnectorError) as info:
        spark_kafka_jars()
    message = str(info.value)
    assert "\n" not in message
    assert str(libs) in message
    assert "scripts/jars" in message


def test_a_connector_of_another_spark_version_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connector built for another Spark than PySpark's is an error naming both versions."""
    libs = jar_dir(tmp_path / "old", "spark-sql-kafka-0-10_2.13-4.1.1.jar")
    monkeypatch.setenv(SPARK_KAFKA_JARS_ENV, str(libs))
    with pytest.raises(SparkConnectorError, match=r"4\.1\.1.*needs exactly .*" + CONNECTOR):
        spark_kafka_jars()


def test_msk_iam_without_its_jar_fails_before_any_task(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """auth = "msk_iam" on a classpath without aws-msk-iam-auth is an error that names the jar
    when the read is set up, not a class-loading failure inside a task."""
    fake = types.ModuleType(SIGNER_MODULE)
    fake.MSKAuthTokenProvider = types.SimpleNamespace(generate_auth_token=None)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, SIGNER_MODULE, fake)  # the aws extra, for the config only
    broker = BrokerConfig(bootstrap_servers="127.0.0.1:9", auth="msk_iam", aws_region="eu-west-1")
    with pytest.raises(SparkConnectorError, match="aws-msk-iam-auth"):
        read_topics(spark, broker, ["prices"])
