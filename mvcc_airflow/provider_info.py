"""What Airflow learns about the provider through the `apache_airflow_provider` entry point (pyproject.toml).

Airflow's providers manager reads this dict without importing the rest of the package: the connection type
`mvcc` and its form (root uri, storage options as JSON, external store), the hook, operators, sensors,
triggers, and the asset URI scheme `mvcc` (docs/integrations/airflow/index.md).
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

INTEGRATION = "mvcc"
CONN_TYPE = "mvcc"
ASSET_SCHEME = "mvcc"

# The connection form's own fields (stored in the connection's `extra`); `host` is relabelled "Root uri".
CONN_FIELDS: dict[str, dict[str, Any]] = {
    "storage_options": {
        "label": "Storage options (JSON)",
        "schema": {"type": ["string", "null"]},
        "description": 'storage options as a JSON object, e.g. {"aws_endpoint": "http://127.0.0.1:9000", '
        '"aws_region": "us-east-1"}; credentials may instead come from the login/password fields or the '
        "standard AWS_* variables",
    },
    "external_store": {
        "label": "External manifest store",
        "schema": {"type": ["string", "null"]},
        "description": (
            "e.g. sqlite:///path/to/store.db or dynamodb://table (docs/operations/external_store.md); empty: none"
        ),
    },
}

UI_FIELD_BEHAVIOUR: dict[str, Any] = {
    "hidden-fields": ["schema", "port", "extra"],
    "relabeling": {
        "host": "Root uri",
        "login": "Access key id (optional)",
        "password": "Secret access key (optional)",
    },
    "placeholders": {
        "host": "s3://bucket/warehouse or /data/warehouse",
        "login": "empty: the AWS_* variables",
        "password": "empty: the AWS_* variables",
        "storage_options": '{"aws_endpoint": "http://127.0.0.1:9000", "aws_region": "us-east-1"}',
        "external_store": "sqlite:///data/manifests.db",
    },
}


def get_provider_info() -> dict[str, Any]:
    """The provider's description for Airflow's providers manager.

    Returns:
        The dict Airflow expects from `get_provider_info` (the keys of Airflow 3.3's provider.yaml schema).
    """
    return {
        "package-name": "mvcc",
        "name": "mvcc",
        "description": "Table maintenance for mvcc tables (advice, compaction, fleet plans on a budget, indices, "
        "cleanup, restore, tags), version sensors and table assets.",
        "versions": [version("mvcc")],  # no import of mvcc_core: the manager reads this often
        "integrations": [
            {
                "integration-name": INTEGRATION,
                "external-doc-url": "https://github.com/lance-format/lance",
                "tags": ["software"],
            }
        ],
        "hooks": [{"integration-name": INTEGRATION, "python-modules": ["mvcc_airflow.hooks.mvcc"]}],
        "operators": [
            {
                "integration-name": INTEGRATION,
                "python-modules": [
                    "mvcc_airflow.operators.base",
                    "mvcc_airflow.operators.advice",
                    "mvcc_airflow.operators.fleet",
                    "mvcc_airflow.operators.maintenance",
                    "mvcc_airflow.operators.compaction_group",
                    "mvcc_airflow.operators.publish_branch",
                ],
            }
        ],
        "sensors": [{"integration-name": INTEGRATION, "python-modules": ["mvcc_airflow.sensors.table_version"]}],
        "triggers": [
            {
                "integration-name": INTEGRATION,
                "python-modules": ["mvcc_airflow.triggers.table_version", "mvcc_airflow.triggers.table_change"],
            }
        ],
        "connection-types": [
            {
                "hook-class-name": "mvcc_airflow.hooks.mvcc.MvccHook",
                "hook-name": "mvcc table",
                "connection-type": CONN_TYPE,
                "conn-fields": CONN_FIELDS,
                "ui-field-behaviour": UI_FIELD_BEHAVIOUR,
            }
        ],
        "asset-uris": [
            {
                "schemes": [ASSET_SCHEME],
                "handler": "mvcc_airflow.assets.mvcc.sanitize_uri",
                "factory": "mvcc_airflow.assets.mvcc.create_asset",
            }
        ],
    }
