// Azure Monitor metrics of one Service Bus namespace, for queues the SLO mode reads: the collect
// function queries IncomingMessages and CompleteMessage per minute (filtered to the queue's
// EntityName) with azure-monitor-query's MetricsQueryClient. Monitoring Reader on the namespace is
// the narrowest built-in role with Microsoft.Insights/metrics/read there.
// Peeking the oldest message needs Listen: servicebus-queue-receiver.bicep assigns Azure Service
// Bus Data Receiver on each such queue alone (never here, on the namespace).
// Deployed into the namespace's resource group, scoped to the namespace.

@description('Name of the existing Service Bus namespace (in the resource group this module is deployed to).')
param namespaceName string

@description('Principal id of the autoscaler managed identity.')
param principalId string

var monitoringReaderRoleId = subscriptionResourceId('Microsoft.Authorization/roleDefinitions', '43d0d8ad-25c7-4714-9337-8ba259a9fe05')

resource namespace 'Microsoft.ServiceBus/namespaces@2022-10-01-preview' existing = {
  name: namespaceName
}

resource metricsReader 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(namespace.id, principalId, monitoringReaderRoleId)
  scope: namespace
  properties: {
    description: 'Monitoring Reader: IncomingMessages and CompleteMessage of the queues mode slo reads'
    principalId: principalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: monitoringReaderRoleId
  }
}
