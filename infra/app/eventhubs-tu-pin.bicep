// Pins one Event Hubs namespace whose throughput units the autoscaler sizes, so that the TU scaler
// role's namespaces/write can effectively change nothing but sku.capacity, within the target's
// bounds (RBAC has no narrower action; main.bicep says why).
//
// A custom policy definition (deny, eventhubs-tu-pin.policy.json) in the namespace's subscription,
// assigned on the namespace resource alone (eventhubs-tu-pin-assignment.bicep) with the values the
// namespace has at deployment time: any create or update of the namespace whose result has another
// SKU name or tier, location, identity type, TLS minimum, public network access, local
// authentication, auto-inflate setting, Kafka, zone redundancy, cluster, alternate name,
// encryption or tags, or a capacity outside [minimum, maximum], is refused with 403
// RequestDisallowedByPolicy, whoever sends it. docs/deploy.md lists what it cannot pin and how to
// change a pinned setting.
//
// Deployed at the namespace's subscription (policy definitions exist at subscription or management
// group scope only); the assignment goes to the namespace's resource group through a module.
targetScope = 'subscription'

@description('Resource id of the existing Event Hubs namespace.')
param namespaceId string

@description('The autoscaler policy\'s namespaces entries (policy.namespaces); the one whose resource_id is namespaceId gives the capacity bounds (min_tus, max_tus; 1 and 20 when absent, the policy\'s defaults).')
param namespacePolicies array = []

@description('Distinguishes the definitions of two autoscaler deployments that size the same namespace.')
param resourceToken string

@description('true: the assignment denies (enforcementMode Default); false: it only reports (DoNotEnforce), so a pinned setting can be changed; deploy again with true to pin the new values.')
param enforce bool = true

// The rule and its parameter declarations: data, tested over the JSON (tests/infra).
var definition = loadJsonContent('eventhubs-tu-pin.policy.json')

var matches = filter(namespacePolicies, entry => toLower(entry.?resource_id ?? '') == toLower(namespaceId))
var minimumCapacity = empty(matches) ? 1 : (matches[0].?min_tus ?? 1)
var maximumCapacity = empty(matches) ? 20 : (matches[0].?max_tus ?? 20)

resource pin 'Microsoft.Authorization/policyDefinitions@2023-04-01' = {
  name: guid(namespaceId, 'eventhubs-lag-autoscaler-tu-pin', resourceToken)
  properties: {
    policyType: 'Custom'
    mode: definition.mode
    displayName: 'Event Hubs namespace pinned but for its throughput units (lag autoscaler ${resourceToken}): ${last(split(namespaceId, '/'))}'
    description: 'Denies any change to this Event Hubs namespace but sku.capacity within the autoscaler target\'s bounds: the autoscaler\'s identity holds Microsoft.EventHub/namespaces/write, which also covers its other settings.'
    metadata: {
      category: 'Event Hub'
    }
    parameters: definition.parameters
    policyRule: definition.policyRule
  }
}

module assignment 'eventhubs-tu-pin-assignment.bicep' = {
  name: take('tu-pin-${uniqueString(namespaceId, resourceToken)}', 64)
  scope: resourceGroup(split(namespaceId, '/')[4])
  params: {
    namespaceName: last(split(namespaceId, '/'))
    policyDefinitionId: pin.id
    minimumCapacity: minimumCapacity
    maximumCapacity: maximumCapacity
    enforce: enforce
  }
}

output policyDefinitionId string = pin.id
output policyAssignmentId string = assignment.outputs.policyAssignmentId
