// Read access to one Service Bus namespace's entities on the management plane: the collect
// function reads each queue's and topic subscription's active message count from a GET of the
// entity (countDetails, azure-mgmt-servicebus: queues.get / subscriptions.get). The custom role
// (defined in main.bicep) grants Microsoft.ServiceBus/namespaces/queues/read and
// .../topics/subscriptions/read only: no data action, so the identity can neither send, receive,
// peek nor delete a message, nor read a key. Deployed into the namespace's resource group, scoped
// to the namespace.

@description('Name of the existing Service Bus namespace (in the resource group this module is deployed to).')
param namespaceName string

@description('Name (GUID) of the custom Service Bus entity reader role definition.')
param roleDefinitionName string

@description('Principal id of the autoscaler managed identity.')
param principalId string

// Resolved in this module's subscription, so namespaces in another subscription of the tenant work
// as long as their resource group is one of the role's assignable scopes.
var entityReaderRoleId = subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roleDefinitionName)

resource namespace 'Microsoft.ServiceBus/namespaces@2022-10-01-preview' existing = {
  name: namespaceName
}

resource entityReader 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(namespace.id, principalId, entityReaderRoleId)
  scope: namespace
  properties: {
    description: 'Service Bus Entity Reader (custom): queue and subscription message counts (management plane, read only)'
    principalId: principalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: entityReaderRoleId
  }
}
