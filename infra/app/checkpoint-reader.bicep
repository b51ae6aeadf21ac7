// Read access to one checkpoint container: the collect function lists the consumer group's
// checkpoint and ownership blobs. Deployed into the checkpoint account's resource group; the role
// is scoped to the container, not to the account.

@description('Name of the existing checkpoint storage account (in the resource group this module is deployed to).')
param storageAccountName string

@description('Name of the existing blob container holding the checkpoints.')
param containerName string

@description('Principal id of the autoscaler managed identity.')
param principalId string

var blobDataReaderRoleId = subscriptionResourceId('Microsoft.Authorization/roleDefinitions', '2a2b9908-6ea1-4ae2-8e65-a410df84e7d1')

resource checkpointAccount 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: storageAccountName
}

resource checkpointBlobService 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' existing = {
  parent: checkpointAccount
  name: 'default'
}

resource checkpointContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' existing = {
  parent: checkpointBlobService
  name: containerName
}

resource checkpointReader 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(checkpointContainer.id, principalId, blobDataReaderRoleId)
  scope: checkpointContainer
  properties: {
    description: 'Storage Blob Data Reader: consumer checkpoints and ownership blobs (this container only)'
    principalId: principalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: blobDataReaderRoleId
  }
}
