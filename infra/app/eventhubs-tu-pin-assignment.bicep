// The assignment of the namespace pin (eventhubs-tu-pin.bicep) on the namespace resource alone,
// with the values the namespace has now as parameters: reading them here, from the existing
// namespace, is what makes a redeployment pin a changed setting's new value.
// Deployed into the namespace's resource group.

@description('Name of the existing Event Hubs namespace (in the resource group this module is deployed to).')
param namespaceName string

@description('Resource id of the pin policy definition (in the namespace\'s subscription).')
param policyDefinitionId string

@minValue(1)
@description('The target\'s min_tus: a lower sku.capacity is denied.')
param minimumCapacity int

@minValue(1)
@description('The target\'s max_tus: a higher sku.capacity is denied.')
param maximumCapacity int

@description('true: deny (enforcementMode Default); false: report only (DoNotEnforce).')
param enforce bool = true

resource namespace 'Microsoft.EventHub/namespaces@2024-01-01' existing = {
  name: namespaceName
}

resource pin 'Microsoft.Authorization/policyAssignments@2023-04-01' = {
  name: guid(namespace.id, policyDefinitionId)
  scope: namespace
  properties: {
    displayName: 'Event Hubs namespace pinned but for its throughput units: ${namespaceName}'
    description: 'Denies any change to this namespace but sku.capacity between ${minimumCapacity} and ${maximumCapacity} TUs (the lag autoscaler\'s namespace target). Deploy the autoscaler with pinEventHubsNamespaceSettings false to change a setting, then with true again.'
    policyDefinitionId: policyDefinitionId
    enforcementMode: enforce ? 'Default' : 'DoNotEnforce'
    nonComplianceMessages: [
      {
        message: 'This Event Hubs namespace is pinned by the lag autoscaler\'s deployment: only sku.capacity may change, between ${minimumCapacity} and ${maximumCapacity} TUs. To change another setting, deploy the autoscaler with pinEventHubsNamespaceSettings false, change it, then deploy with true (docs/deploy.md).'
      }
    ]
    // One entry per parameter of eventhubs-tu-pin.policy.json (tests/infra checks the two match).
    // Optional values: string(value), or '' when the namespace has none (the rule then denies
    // adding one); objects: {} when absent.
    parameters: {
      minimumCapacity: {
        value: minimumCapacity
      }
      maximumCapacity: {
        value: maximumCapacity
      }
      skuName: {
        value: namespace.sku.name
      }
      skuTier: {
        value: namespace.sku.tier
      }
      location: {
        value: namespace.location
      }
      identityType: {
        value: string(namespace.?identity.?type ?? '')
      }
      minimumTlsVersion: {
        value: string(namespace.properties.?minimumTlsVersion ?? '')
      }
      publicNetworkAccess: {
        value: string(namespace.properties.?publicNetworkAccess ?? '')
      }
      disableLocalAuth: {
        value: string(namespace.properties.?disableLocalAuth ?? '')
      }
      isAutoInflateEnabled: {
        value: string(namespace.properties.?isAutoInflateEnabled ?? '')
      }
      maximumThroughputUnits: {
        value: string(namespace.properties.?maximumThroughputUnits ?? '')
      }
      kafkaEnabled: {
        value: string(namespace.properties.?kafkaEnabled ?? '')
      }
      zoneRedundant: {
        value: string(namespace.properties.?zoneRedundant ?? '')
      }
      clusterArmId: {
        value: string(namespace.properties.?clusterArmId ?? '')
      }
      alternateName: {
        value: string(namespace.properties.?alternateName ?? '')
      }
      tags: {
        value: namespace.?tags ?? {}
      }
      encryption: {
        value: namespace.properties.?encryption ?? {}
      }
    }
  }
}

output policyAssignmentId string = pin.id
