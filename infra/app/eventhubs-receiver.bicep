// Read access to one Event Hubs namespace's runtime information: the collect function reads each
// partition's last enqueued sequence number (get_partition_properties). Deployed into the
// namespace's resource group. With eventHubNames given, the role is narrowed to those hubs;
// otherwise it is assigned on the namespace.

@description('Name of the existing Event Hubs namespace (in the resource group this module is deployed to).')
param namespaceName string

@description('Event hubs the autoscaler watches; empty assigns the role on the whole namespace.')
param eventHubNames array = []

@description('Principal id of the autoscaler managed identity.')
param principalId string

var eventHubsDataReceiverRoleId = subscriptionResourceId('Microsoft.Authorization/roleDefinitions', 'a638d3c7-ab3a-418d-83e6-5f17a39d4fde')

resource namespace 'Microsoft.EventHub/namespaces@2024-01-01' existing = {
  name: namespaceName
}

resource hubs 'Microsoft.EventHub/namespaces/eventhubs@2024-01-01' existing = [for hubName in eventHubNames: {
  parent: namespace
  name: hubName
}]

resource namespaceReceiver 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (empty(eventHubNames)) {
  name: guid(namespace.id, principalId, eventHubsDataReceiverRoleId)
  scope: namespace
  properties: {
    description: 'Azure Event Hubs Data Receiver: partition runtime properties of every hub in the namespace'
    principalId: principalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: eventHubsDataReceiverRoleId
  }
}

resource hubReceivers 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for (hubName, i) in eventHubNames: {
  name: guid(hubs[i].id, principalId, eventHubsDataReceiverRoleId)
  scope: hubs[i]
  properties: {
    description: 'Azure Event Hubs Data Receiver: partition runtime properties of this hub'
    principalId: principalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: eventHubsDataReceiverRoleId
  }
}]
