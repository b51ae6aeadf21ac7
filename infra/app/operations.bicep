// What an operator on call looks at: an Azure Monitor workbook over the autoscaler's telemetry and
// log search alert rules, all reading the Application Insights component's customMetrics (the
// OpenTelemetry metrics `autoscaler.*`, contract in docs/operations-monitoring.md).
//
// Nothing here holds a key or is granted a role: the workbook runs its queries as the person
// viewing it, the alert rules are evaluated by Azure Monitor on the component they are scoped to,
// and the action group only sends e-mail.

@description('Azure region of the workbook and the alert rules.')
param location string

@description('Tags applied to every resource.')
param tags object = {}

@description('Resource id of the Application Insights component the autoscaler sends telemetry to.')
param applicationInsightsId string

@description('Short token used in resource names (the deployment\'s resource token).')
param resourceToken string

@description('E-mail addresses notified when an alert fires; empty: no action group (the alerts still show in Azure Monitor).')
param alertEmailAddresses array = []

var workbookDisplayName = 'Event Hubs lag autoscaler (${resourceToken})'
var hasActionGroup = !empty(alertEmailAddresses)

// --- the workbook ---------------------------------------------------------------------------------
// Notebook/1.0 JSON, built here and stored as text (serializedData). {Target} is the dropdown
// parameter; every chart reads the selected target's metrics over the time range parameter.

var aiResourceType = 'microsoft.insights/components'

var targetsQuery = '''
customMetrics
| where name startswith "autoscaler."
| extend target = tostring(customDimensions.target)
| where isnotempty(target)
| distinct target
| order by target asc
'''

var arrivalsQuery = '''
customMetrics
| where tostring(customDimensions.target) == "{Target}"
| where name in ("autoscaler.arrival_rate", "autoscaler.capacity_observed", "autoscaler.throughput_per_instance")
| summarize v = avg(value) by name, source = tostring(customDimensions.source), timestamp = bin(timestamp, 1m)
| summarize arrivals = sumif(v, name == "autoscaler.arrival_rate"), capacity = maxif(v, name == "autoscaler.capacity_observed"), per_instance = maxif(v, name == "autoscaler.throughput_per_instance") by timestamp
| project timestamp, ["arrivals (events/s)"] = arrivals, ["serving capacity (events/s)"] = capacity * per_instance
| order by timestamp asc
'''

var backlogQuery = '''
customMetrics
| where tostring(customDimensions.target) == "{Target}"
| where name == "autoscaler.backlog"
| summarize backlog = avg(value) by source = tostring(customDimensions.source), timestamp = bin(timestamp, 1m)
| summarize ["backlog (events)"] = sum(backlog) by timestamp
| order by timestamp asc
'''

var ageQuery = '''
customMetrics
| where tostring(customDimensions.target) == "{Target}"
| where name in ("autoscaler.oldest_event_age_seconds", "autoscaler.predicted_age_seconds", "autoscaler.slo_seconds")
| summarize v = max(value) by name, timestamp = bin(timestamp, 1m)
| summarize ["oldest event age (s)"] = maxif(v, name == "autoscaler.oldest_event_age_seconds"), ["predicted age (s)"] = maxif(v, name == "autoscaler.predicted_age_seconds"), ["SLO (s)"] = maxif(v, name == "autoscaler.slo_seconds") by timestamp
| order by timestamp asc
'''

var capacityQuery = '''
customMetrics
| where tostring(customDimensions.target) == "{Target}"
| where name in ("autoscaler.capacity_desired", "autoscaler.capacity_requested", "autoscaler.capacity_observed", "autoscaler.decisions")
| extend direction = tostring(customDimensions.direction)
| summarize capacity = avgif(value, name != "autoscaler.decisions"), actions = sumif(value, name == "autoscaler.decisions" and direction in ("up", "down")) by name, direction, timestamp = bin(timestamp, 1m)
| summarize ["desired"] = maxif(capacity, name == "autoscaler.capacity_desired"), ["requested"] = maxif(capacity, name == "autoscaler.capacity_requested"), ["observed"] = maxif(capacity, name == "autoscaler.capacity_observed"), ["scale-outs"] = sumif(actions, direction == "up"), ["scale-ins"] = sumif(actions, direction == "down") by timestamp
| order by timestamp asc
'''

var reasonsQuery = '''
customMetrics
| where tostring(customDimensions.target) == "{Target}"
| where name == "autoscaler.decisions"
| summarize decisions = sum(value), last_seen = max(timestamp) by direction = tostring(customDimensions.direction), reason = tostring(customDimensions.reason)
| order by decisions desc
'''

var failuresQuery = '''
customMetrics
| where name in ("autoscaler.collection_failures", "autoscaler.dead_letters", "autoscaler.arm_writes")
| where name == "autoscaler.dead_letters" or tostring(customDimensions.target) == "{Target}"
| extend series = case(name == "autoscaler.collection_failures", strcat("collection failures: ", tostring(customDimensions.source)), name == "autoscaler.dead_letters", strcat("dead letters: ", tostring(customDimensions["function"])), strcat("ARM writes ", tostring(customDimensions.outcome)))
| where name != "autoscaler.arm_writes" or tostring(customDimensions.outcome) == "failed"
| summarize count_ = sum(value) by series, timestamp = bin(timestamp, 5m)
| order by timestamp asc
'''

var armLatencyQuery = '''
customMetrics
| where tostring(customDimensions.target) == "{Target}"
| where name == "autoscaler.arm_write_duration_ms"
| summarize ["mean ARM write (ms)"] = sum(valueSum) / sum(valueCount), ["slowest ARM write (ms)"] = max(valueMax) by timestamp = bin(timestamp, 15m)
| order by timestamp asc
'''

// A namespace target (kind eventhubs_namespace): its throughput units beside its throttled
// requests per minute, so that a TU change can be read against the throttling it answered.
var namespaceQuery = '''
customMetrics
| where tostring(customDimensions.target) == "{Target}"
| where name in ("autoscaler.throughput_units", "autoscaler.throttled_requests")
| summarize v = max(value) by name, timestamp = bin(timestamp, 1m)
| summarize ["throughput units"] = maxif(v, name == "autoscaler.throughput_units"), ["throttled requests per minute"] = maxif(v, name == "autoscaler.throttled_requests") by timestamp
| order by timestamp asc
'''

var timeRangeParameter = 'TimeRange'

var workbook = {
  version: 'Notebook/1.0'
  items: [
    {
      type: 1
      name: 'intro'
      content: {
        json: '## Event Hubs lag autoscaler\nPer target: arrivals against the serving capacity, backlog and the oldest event\'s age against the SLO, the plan\'s capacity with the scale decisions, why it decided, and what failed. Metric contract: docs/operations-monitoring.md in the repository.'
      }
    }
    {
      type: 9
      name: 'parameters'
      content: {
        version: 'KqlParameterItem/1.0'
        style: 'pills'
        queryType: 0
        resourceType: aiResourceType
        parameters: [
          {
            id: 'a3d5c6f0-0d7e-4c57-9a51-2f0c9d1e7b01'
            version: 'KqlParameterItem/1.0'
            name: timeRangeParameter
            label: 'Time range'
            type: 4
            isRequired: true
            value: {
              durationMs: 86400000
            }
            typeSettings: {
              selectableValues: [
                {
                  durationMs: 3600000
                }
                {
                  durationMs: 14400000
                }
                {
                  durationMs: 86400000
                }
                {
                  durationMs: 604800000
                }
                {
                  durationMs: 2592000000
                }
              ]
              allowCustom: true
            }
          }
          {
            id: 'b7e2f1a4-3c9d-4e8b-8f6a-5d4c3b2a1f02'
            version: 'KqlParameterItem/1.0'
            name: 'Target'
            label: 'Target'
            type: 2
            isRequired: true
            query: targetsQuery
            queryType: 0
            resourceType: aiResourceType
            timeContextFromParameter: timeRangeParameter
            typeSettings: {
              additionalResourceOptions: []
              showDefault: false
            }
            value: null
          }
        ]
      }
    }
    {
      type: 3
      name: 'arrivals'
      content: {
        version: 'KqlItem/1.0'
        title: 'Arrivals vs serving capacity (events/s)'
        query: arrivalsQuery
        size: 0
        queryType: 0
        resourceType: aiResourceType
        timeContextFromParameter: timeRangeParameter
        visualization: 'timechart'
      }
    }
    {
      type: 3
      name: 'backlog'
      content: {
        version: 'KqlItem/1.0'
        title: 'Backlog (events)'
        query: backlogQuery
        size: 0
        queryType: 0
        resourceType: aiResourceType
        timeContextFromParameter: timeRangeParameter
        visualization: 'timechart'
      }
    }
    {
      type: 3
      name: 'age'
      content: {
        version: 'KqlItem/1.0'
        title: 'Oldest-event age against the SLO (s)'
        query: ageQuery
        size: 0
        queryType: 0
        resourceType: aiResourceType
        timeContextFromParameter: timeRangeParameter
        visualization: 'timechart'
      }
    }
    {
      type: 3
      name: 'capacity'
      content: {
        version: 'KqlItem/1.0'
        title: 'Plan capacity (instances) and scale decisions'
        query: capacityQuery
        size: 0
        queryType: 0
        resourceType: aiResourceType
        timeContextFromParameter: timeRangeParameter
        visualization: 'linechart'
      }
    }
    {
      type: 3
      name: 'reasons'
      content: {
        version: 'KqlItem/1.0'
        title: 'Decisions by direction and reason'
        query: reasonsQuery
        size: 0
        queryType: 0
        resourceType: aiResourceType
        timeContextFromParameter: timeRangeParameter
        visualization: 'table'
      }
    }
    {
      type: 3
      name: 'failures'
      content: {
        version: 'KqlItem/1.0'
        title: 'Collection failures, dead letters, failed ARM writes'
        query: failuresQuery
        size: 0
        queryType: 0
        resourceType: aiResourceType
        timeContextFromParameter: timeRangeParameter
        visualization: 'barchart'
      }
    }
    {
      type: 3
      name: 'namespace'
      content: {
        version: 'KqlItem/1.0'
        title: 'Event Hubs namespace targets: throughput units and throttled requests'
        query: namespaceQuery
        size: 0
        queryType: 0
        resourceType: aiResourceType
        timeContextFromParameter: timeRangeParameter
        visualization: 'linechart'
      }
    }
    {
      type: 3
      name: 'arm-latency'
      content: {
        version: 'KqlItem/1.0'
        title: 'ARM write latency (ms)'
        query: armLatencyQuery
        size: 0
        queryType: 0
        resourceType: aiResourceType
        timeContextFromParameter: timeRangeParameter
        visualization: 'timechart'
      }
    }
  ]
  fallbackResourceIds: [
    applicationInsightsId
  ]
  '$schema': 'https://github.com/Microsoft/Application-Insights-Workbooks/blob/master/schema/workbook.json'
}

resource dashboard 'Microsoft.Insights/workbooks@2023-06-01' = {
  name: guid(resourceGroup().id, applicationInsightsId, 'eventhubs-lag-autoscaler-workbook')
  location: location
  tags: tags
  kind: 'shared'
  properties: {
    displayName: workbookDisplayName
    category: 'workbook'
    sourceId: applicationInsightsId
    serializedData: string(workbook)
    version: 'Notebook/1.0'
  }
}

// --- alerts ---------------------------------------------------------------------------------------

resource actionGroup 'Microsoft.Insights/actionGroups@2023-01-01' = if (hasActionGroup) {
  name: 'ag-autoscaler-${resourceToken}'
  location: 'global'
  tags: tags
  properties: {
    groupShortName: 'autoscaler'
    enabled: true
    emailReceivers: [for (address, i) in alertEmailAddresses: {
      name: 'email-${i}'
      emailAddress: address
      useCommonAlertSchema: true
    }]
  }
}

var namespaceThrottledQuery = '''
customMetrics
| where name in ("autoscaler.throttled_requests", "autoscaler.throughput_units")
| extend target = tostring(customDimensions.target)
| summarize throttled = maxif(value, name == "autoscaler.throttled_requests"), tus = maxif(value, name == "autoscaler.throughput_units") by target, minute = bin(timestamp, 1m)
| summarize minutes_throttled = countif(throttled > 0), throughput_units = max(tus) by target
| where minutes_throttled >= 10
'''

var sloBreachedQuery = '''
customMetrics
| where name in ("autoscaler.oldest_event_age_seconds", "autoscaler.slo_seconds")
| extend target = tostring(customDimensions.target)
| summarize age = maxif(value, name == "autoscaler.oldest_event_age_seconds"), slo = maxif(value, name == "autoscaler.slo_seconds") by target, minute = bin(timestamp, 1m)
| where isnotnull(age) and isnotnull(slo) and slo > 0
| summarize minutes = count(), minutes_above = countif(age > slo), worst_age_seconds = max(age) by target
| where minutes >= 4 and minutes_above == minutes
'''

var collectorSilentQuery = '''
customMetrics
| where name == "autoscaler.samples"
| extend target = tostring(customDimensions.target)
| summarize last_sample = max(timestamp) by target
| where last_sample < ago(5m)
| extend silent_minutes = datetime_diff("minute", now(), last_sample)
'''

var scaleWritesFailingQuery = '''
customMetrics
| where name == "autoscaler.arm_writes"
| extend target = tostring(customDimensions.target), outcome = tostring(customDimensions.outcome)
| where outcome == "failed"
| summarize failed_writes = sum(value) by target
| where failed_writes > 0
'''

var deadLettersQuery = '''
customMetrics
| where name == "autoscaler.dead_letters"
| extend function_name = tostring(customDimensions["function"])
| summarize dead_letters = sum(value) by function_name
| where dead_letters > 0
'''

var partitionProblemQuery = '''
customMetrics
| where name == "autoscaler.decisions"
| extend target = tostring(customDimensions.target), reason = tostring(customDimensions.reason)
| where reason in ("hot_partition", "unowned_partitions", "stall")
| summarize reports = sum(value) by target, reason
| where reports > 0
'''

var conflictQuery = '''
customMetrics
| where name == "autoscaler.decisions"
| extend target = tostring(customDimensions.target), reason = tostring(customDimensions.reason)
| where reason startswith "conflict:"
| summarize reports = sum(value) by target, reason
| where reports > 0
'''

var stateUnreadableQuery = '''
customMetrics
| where name == "autoscaler.decisions"
| extend target = tostring(customDimensions.target), reason = tostring(customDimensions.reason)
| where reason == "state_unreadable"
| summarize reports = sum(value) by target, reason
| where reports > 0
'''

// One rule per condition; each row of a query is one alert, split by the named dimension.
var alertRules = [
  {
    name: 'slo-breached'
    displayName: 'Autoscaler: SLO breached'
    description: 'The oldest unprocessed event of a target has been older than its SLO for 5 minutes (autoscaler.oldest_event_age_seconds > autoscaler.slo_seconds).'
    severity: 1
    frequency: 'PT1M'
    window: 'PT5M'
    query: sloBreachedQuery
    dimension: 'target'
  }
  {
    name: 'collector-silent'
    displayName: 'Autoscaler: collector silent'
    description: 'No sample (autoscaler.samples) for a target for 5 minutes, among the targets seen in the last 6 hours: collect is not running or cannot reach its sources.'
    severity: 1
    frequency: 'PT5M'
    window: 'PT6H'
    query: collectorSilentQuery
    dimension: 'target'
  }
  {
    name: 'scale-writes-failing'
    displayName: 'Autoscaler: scale writes failing'
    description: 'ARM rejected or failed a plan resize (autoscaler.arm_writes with outcome failed) in the last 15 minutes.'
    severity: 2
    frequency: 'PT5M'
    window: 'PT15M'
    query: scaleWritesFailingQuery
    dimension: 'target'
  }
  {
    name: 'dead-letters'
    displayName: 'Autoscaler: dead letters'
    description: 'Messages were dead-lettered (autoscaler.dead_letters) in the last 15 minutes: read them with Storage Explorer in the deadletters table.'
    severity: 2
    frequency: 'PT5M'
    window: 'PT15M'
    query: deadLettersQuery
    dimension: 'function_name'
  }
  {
    name: 'partition-problem'
    displayName: 'Autoscaler: hot or unowned partition, or stalled consumers'
    description: 'A decision reported a hot partition, unowned partitions or a stall (autoscaler.decisions reason hot_partition / unowned_partitions / stall; the decision log has the numbers: instances serving, events processed per second before and now, arrivals) in the last 15 minutes: more instances will not help, look at the consumers.'
    severity: 3
    frequency: 'PT5M'
    window: 'PT15M'
    query: partitionProblemQuery
    dimension: 'target'
  }
  {
    name: 'namespace-throttled'
    displayName: 'Autoscaler: an Event Hubs namespace keeps throttling'
    description: 'A namespace target reported throttled requests in 10 of the last 15 minutes (autoscaler.throttled_requests, with its autoscaler.throughput_units): its TUs are at max_tus, auto-inflate holds them, or the writes fail. Raise max_tus (Standard: 40) or look at the namespace target\'s decisions.'
    severity: 2
    frequency: 'PT5M'
    window: 'PT15M'
    query: namespaceThrottledQuery
    dimension: 'target'
  }
  {
    name: 'controller-conflict'
    displayName: 'Autoscaler: another controller drives the plan'
    description: 'A target holds because another controller drives its plan (autoscaler.decisions reason conflict:autoscale-setting: an enabled Azure Monitor autoscale setting targets it; conflict:external-writer: it was resized from outside more than EXTERNAL_CHANGES_PER_HOUR times in an hour). Disable the other controller; after an external writer, run resume.'
    severity: 1
    frequency: 'PT5M'
    window: 'PT15M'
    query: conflictQuery
    dimension: 'target'
  }
  {
    name: 'state-unreadable'
    displayName: 'Autoscaler: a target\'s stored state could not be read'
    description: 'An evaluation found fields of a target\'s state entity it could not read (autoscaler.decisions reason state_unreadable: an out-of-band edit or an older writer). Each counts as unset (an unreadable pause as expired) and is written back cleanly; the decision log row names the field and its error. Find who edited the scalerstate table; pause again if the pause was meant.'
    severity: 2
    frequency: 'PT5M'
    window: 'PT15M'
    query: stateUnreadableQuery
    dimension: 'target'
  }
]

resource alerts 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = [for rule in alertRules: {
  name: 'alert-autoscaler-${rule.name}-${resourceToken}'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: rule.displayName
    description: rule.description
    severity: rule.severity
    enabled: true
    evaluationFrequency: rule.frequency
    windowSize: rule.window
    scopes: [
      applicationInsightsId
    ]
    criteria: {
      allOf: [
        {
          query: rule.query
          timeAggregation: 'Count'
          operator: 'GreaterThan'
          threshold: 0
          dimensions: [
            {
              name: rule.dimension
              operator: 'Include'
              values: [
                '*'
              ]
            }
          ]
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: true
    // The metrics appear only once the app has sent them: the queries are valid, their tables may be empty.
    skipQueryValidation: true
    actions: {
      actionGroups: hasActionGroup ? [
        actionGroup.id
      ] : []
    }
  }
}]

output workbookId string = dashboard.id
output workbookName string = dashboard.name
output alertRuleNames array = [for (rule, i) in alertRules: alerts[i].name]
output actionGroupId string = hasActionGroup ? actionGroup.id : ''
