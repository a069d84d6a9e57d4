"""Fixtures of the pipeline's transform tests: one shared local SparkSession.

Each test module here marks itself ``spark`` (``pytestmark``).
"""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from tests.spark.session import local_spark


@pytest.fixture(scope="session")
def spark() -> SparkSession:
    """The suite's shared ``local[2]`` session."""
    return local_spark()
