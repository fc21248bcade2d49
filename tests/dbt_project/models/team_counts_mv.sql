{{ config(materialized='materialized_view') }}
select team, count(*) as members from {{ ref('people') }} group by team
