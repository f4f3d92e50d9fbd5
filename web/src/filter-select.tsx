/** A labelled drop-down that narrows a list: the empty value means no filter. */
export function FilterSelect(props: { id: string; label: string; value: string; all: string; options: readonly string[]; onChange: (value: string) => void }) {
  return (
    <>
      <label for={props.id}>{props.label}</label>
      <select id={props.id} value={props.value} onChange={(event) => props.onChange(event.currentTarget.value)}>
        <option value="">{props.all}</option>
        {props.options.map((value) => (
          <option key={value} value={value}>
            {value}
          </option>
        ))}
      </select>
    </>
  );
}
