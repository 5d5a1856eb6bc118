"""CloudWatch alarms shared by the data stack (queues, table) and the app stack (API, functions).

Every alarm notifies the optional ``AlarmTopicArn`` parameter (an SNS topic ARN; empty: the
alarms exist but notify nobody) when it fires and when it clears."""
from __future__ import annotations

from typing import Any

PARAMETER = 'AlarmTopicArn'
CONDITION = 'HasAlarmTopic'
PERIOD = 300


def parameters() -> dict[str, Any]:
    return {PARAMETER: {'Type': 'String', 'Default': '',
                        'Description': 'SNS topic ARN that alarms notify (optional)'}}


def conditions() -> dict[str, Any]:
    return {CONDITION: {'Fn::Not': [{'Fn::Equals': [{'Ref': PARAMETER}, '']}]}}


def _actions() -> dict[str, Any]:
    topic = {'Fn::If': [CONDITION, [{'Ref': PARAMETER}], {'Ref': 'AWS::NoValue'}]}
    return {'AlarmActions': topic, 'OKActions': topic}


def alarm(name: str, description: str, *, namespace: str, metric: str, dimensions: dict[str, Any],
          statistic: str = 'Sum', threshold: float = 0, evaluation_periods: int = 1,
          period: int = PERIOD) -> dict[str, Any]:
    """An alarm on one metric: breaching when the statistic is greater than ``threshold``."""
    return {
        'Type': 'AWS::CloudWatch::Alarm',
        'Properties': {
            'AlarmName': name, 'AlarmDescription': description,
            'Namespace': namespace, 'MetricName': metric,
            'Dimensions': [{'Name': k, 'Value': v} for k, v in dimensions.items()],
            'Statistic': statistic, 'Period': period, 'EvaluationPeriods': evaluation_periods,
            'Threshold': threshold, 'ComparisonOperator': 'GreaterThanThreshold',
            'TreatMissingData': 'notBreaching', **_actions(),
        },
    }


MAX_MATH_METRICS = 10   # metrics CloudWatch allows in one metric-math alarm


def sum_alarm(name: str, description: str, *, namespace: str, metric_dimensions: list[tuple[str, dict[str, Any]]],
              threshold: float = 0) -> dict[str, Any]:
    """An alarm on the sum of several metrics (metric math; at most 10 metrics per alarm)."""
    if not 0 < len(metric_dimensions) <= MAX_MATH_METRICS:
        raise ValueError('a metric-math alarm takes 1 to 10 metrics')
    metrics = [{
        'Id': f'm{i}', 'ReturnData': False,
        'MetricStat': {'Stat': 'Sum', 'Period': PERIOD, 'Metric': {
            'Namespace': namespace, 'MetricName': metric,
            'Dimensions': [{'Name': k, 'Value': v} for k, v in dims.items()]}},
    } for i, (metric, dims) in enumerate(metric_dimensions)]
    total = {'Id': 'total', 'Label': 'sum', 'ReturnData': True,
             'Expression': ' + '.join(f"FILL({m['Id']}, 0)" for m in metrics)}
    return {
        'Type': 'AWS::CloudWatch::Alarm',
        'Properties': {
            'AlarmName': name, 'AlarmDescription': description, 'Metrics': metrics + [total],
            'EvaluationPeriods': 1, 'Threshold': threshold, 'ComparisonOperator': 'GreaterThanThreshold',
            'TreatMissingData': 'notBreaching', **_actions(),
        },
    }
