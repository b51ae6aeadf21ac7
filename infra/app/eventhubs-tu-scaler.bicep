// Lets the autoscaler size one Event Hubs namespace's throughput units (a namespace target,
// kind eventhubs_namespace): the custom TU scaler role (defined in main.bicep) and Monitoring
// Reader, both assigned on the namespace resource itself, never on its resource group.
// - TU scaler: namespaces/read + namespaces/write, to read sku.capacity and auto-inflate and to
//   PATCH sku.capacity. See main.bicep for why write cannot be narrower than the namespace.
// - Monitoring Reader: Microsoft.Insights/metrics/read on the namespace, for IncomingBytes,
//   IncomingMessages, OutgoingBytes, OutgoingMessages and ThrottledRequests per minute (the
//   narrowest built-in role with metrics read).
// Deployed into the namespace's resource group, scoped to the namespace.

@description('Name of the existing Event Hubs namespace (in the resource group this module is deployed to).')
param namespaceName string

@description('Name (GUID) of the custom throughput-unit scaler role definition.')
param roleDefinitionName string

@description('Principal id of the autoscaler managed identity.')
param principalId string

var tuScalerRoleId = subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roleDefinitionName)
var monitoringReaderRoleId = subscriptionResourceId('Microsoft.Authorization/roleDefinitions', '43d0d8ad-25c7-4714-9337-8ba259a9fe05')

resource namespace 'Microsoft.EventHub/namespaces@2024-01-01' existing = {
  name: namespaceName
}

resource tuScaler 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(namespace.id, principalId, tuScalerRoleId)
  scope: namespace
  properties: {
    description: 'Event Hubs Throughput Unit Scaler (custom): read this namespace and change its sku.capacity'
    principalId: principalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: tuScalerRoleId
  }
}

resource metricsReader 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(namespace.id, principalId, monitoringReaderRoleId)
  scope: namespace
  properties: {
    description: 'Monitoring Reader: the namespace\'s ingress, egress and throttling metrics per minute'
    principalId: principalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: monitoringReaderRoleId
  }
}
