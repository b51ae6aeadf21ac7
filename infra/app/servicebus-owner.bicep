// Access to one Service Bus namespace's runtime properties: the collect function reads the active
// message count of queues and subscriptions with the administration client
// (get_queue_runtime_properties / get_subscription_runtime_properties). Those are management
// operations over the data plane that need the Manage right: Azure Service Bus Data Receiver is
// not enough, Azure Service Bus Data Owner is the narrowest built-in role that grants it.
// Deployed into the namespace's resource group, scoped to the namespace.

@description('Name of the existing Service Bus namespace (in the resource group this module is deployed to).')
param namespaceName string

@description('Principal id of the autoscaler managed identity.')
param principalId string

var serviceBusDataOwnerRoleId = subscriptionResourceId('Microsoft.Authorization/roleDefinitions', '090c5cfd-751d-490a-894a-3ce6f1109419')

resource namespace 'Microsoft.ServiceBus/namespaces@2022-10-01-preview' existing = {
  name: namespaceName
}

resource serviceBusOwner 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(namespace.id, principalId, serviceBusDataOwnerRoleId)
  scope: namespace
  properties: {
    description: 'Azure Service Bus Data Owner: queue and subscription runtime properties (Manage right)'
    principalId: principalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: serviceBusDataOwnerRoleId
  }
}
