{{ config(materialized='view') }}
select id, name from {{ ref('people') }} where team = 'core'
