{{ config(materialized='incremental', unique_key='id') }}
select id, name, salary * 2 as doubled
from {{ ref('people') }}
{% if is_incremental() %}
where id > (select coalesce(max(id), 0) from {{ this }})
{% endif %}
