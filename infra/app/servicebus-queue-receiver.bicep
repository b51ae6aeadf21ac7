// Listen on one Service Bus queue that feeds mode slo: the collect function peeks its oldest
// message (ServiceBusReceiver.peek_messages, one message, nothing locked or removed) for the
// oldest message's age. Peek is a data-plane operation that needs Listen, which only Azure
// Service Bus Data Receiver grants among the built-in roles; it is assigned on this queue alone,
// never on the namespace, so no other queue or topic of the namespace can be read.
// Deployed into the namespace's resource group, scoped to the queue.

@description('Name of the existing Service Bus namespace (in the resource group this module is deployed to).')
param namespaceName string

@description('Name of the existing queue in that namespace whose oldest message is peeked.')
param queueName string

@description('Principal id of the autoscaler managed identity.')
param principalId string

var serviceBusDataReceiverRoleId = subscriptionResourceId('Microsoft.Authorization/roleDefinitions', '4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0')

resource namespace 'Microsoft.ServiceBus/namespaces@2022-10-01-preview' existing = {
  name: namespaceName
}

resource queue 'Microsoft.ServiceBus/namespaces/queues@2022-10-01-preview' existing = {
  parent: namespace
  name: queueName
}

resource queueReceiver 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(queue.id, principalId, serviceBusDataReceiverRoleId)
  scope: queue
  properties: {
    description: 'Azure Service Bus Data Receiver: peek the oldest message of this queue only (mode slo)'
    principalId: principalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: serviceBusDataReceiverRoleId
  }
}
