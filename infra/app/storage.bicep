// The autoscaler's own storage account: the Functions host storage (AzureWebJobsStorage), the
// pipeline queues, the state tables and the Flex Consumption deployment container.
// Shared keys are disabled: every client authenticates with Entra ID (the managed identity in
// Azure, Azurite's well-known development account locally).

@description('Name of the storage account (3-24 lower-case letters and digits).')
@minLength(3)
@maxLength(24)
param name string

@description('Azure region.')
param location string

@description('Tags applied to the account.')
param tags object = {}

@description('Blob container that receives the Flex Consumption deployment package.')
param deploymentContainerName string

@description('Queues the functions read and write; poison queues are created up front.')
param queueNames array = [
  'metrics'
  'metrics-poison'
  'actions'
  'actions-poison'
]

@description('Tables the functions use.')
param tableNames array = [
  'metrichistory'
  'scalerstate'
  'deadletters'
  'appliedactions'
]

@description('Principal id of the autoscaler managed identity.')
param principalId string

// Built-in data-plane roles, scoped to this account only.
var queueDataContributorRoleId = subscriptionResourceId('Microsoft.Authorization/roleDefinitions', '974c5e8b-45b9-4653-ba55-5f855dd0fb88')
var tableDataContributorRoleId = subscriptionResourceId('Microsoft.Authorization/roleDefinitions', '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3')
var blobDataOwnerRoleId = subscriptionResourceId('Microsoft.Authorization/roleDefinitions', 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b')

resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  name: name
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: 'Standard_LRS'
  }
  properties: {
    accessTier: 'Hot'
    allowBlobPublicAccess: false
    allowCrossTenantReplication: false
    allowSharedKeyAccess: false
    defaultToOAuthAuthentication: true
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    networkAcls: {
      bypass: 'AzureServices'
      defaultAction: 'Allow'
    }
  }
}

resource blobService 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' = {
  parent: storage
  name: 'default'
}

resource deploymentContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = {
  parent: blobService
  name: deploymentContainerName
  properties: {
    publicAccess: 'None'
  }
}

resource queueService 'Microsoft.Storage/storageAccounts/queueServices@2023-05-01' = {
  parent: storage
  name: 'default'
}

resource queues 'Microsoft.Storage/storageAccounts/queueServices/queues@2023-05-01' = [for queueName in queueNames: {
  parent: queueService
  name: queueName
}]

resource tableService 'Microsoft.Storage/storageAccounts/tableServices@2023-05-01' = {
  parent: storage
  name: 'default'
}

resource tables 'Microsoft.Storage/storageAccounts/tableServices/tables@2023-05-01' = [for tableName in tableNames: {
  parent: tableService
  name: tableName
}]

resource queueDataContributor 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(storage.id, principalId, queueDataContributorRoleId)
  scope: storage
  properties: {
    description: 'Storage Queue Data Contributor: queue triggers and outputs (metrics, actions, poison queues)'
    principalId: principalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: queueDataContributorRoleId
  }
}

resource tableDataContributor 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(storage.id, principalId, tableDataContributorRoleId)
  scope: storage
  properties: {
    description: 'Storage Table Data Contributor: history, state, decision log, dead letters, applied actions'
    principalId: principalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: tableDataContributorRoleId
  }
}

resource blobDataOwner 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(storage.id, principalId, blobDataOwnerRoleId)
  scope: storage
  properties: {
    description: 'Storage Blob Data Owner: Functions host leases and secrets, Flex deployment package'
    principalId: principalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: blobDataOwnerRoleId
  }
}

output name string = storage.name
output id string = storage.id
output blobEndpoint string = storage.properties.primaryEndpoints.blob
output queueEndpoint string = storage.properties.primaryEndpoints.queue
output tableEndpoint string = storage.properties.primaryEndpoints.table
output deploymentContainerName string = deploymentContainer.name
